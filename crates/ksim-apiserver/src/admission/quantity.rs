//! A small resource.Quantity parser, enough to compare requests with limits
//! and check signs. (To move to ksim-core.)

/// A parsed quantity in nano-units (1 = 10^-9), saturating at the i128 range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Quantity(i128);

impl Quantity {
    /// Parses `128Mi`, `0.5`, `250m`, `1e3`, `-1`; `None` when not a quantity.
    pub(crate) fn parse(text: &str) -> Option<Quantity> {
        let text = text.trim();
        let (negative, rest) = match text.as_bytes().first()? {
            b'-' => (true, &text[1..]),
            b'+' => (false, &text[1..]),
            _ => (false, text),
        };
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, suffix) = rest.split_at(number_end);
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return None;
        }
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        // digits as an integer, scaled by 10^-fraction.len()
        let digits: String = format!("{whole}{fraction}");
        let mut mantissa: i128 = 0;
        for d in digits.bytes() {
            mantissa = mantissa
                .saturating_mul(10)
                .saturating_add(i128::from(d - b'0'));
        }
        let mut exp10: i32 = -(i32::try_from(fraction.len()).ok()?);
        let mut mul2: i128 = 1;
        match suffix {
            "" => {}
            "n" => exp10 -= 9,
            "u" => exp10 -= 6,
            "m" => exp10 -= 3,
            "k" => exp10 += 3,
            "M" => exp10 += 6,
            "G" => exp10 += 9,
            "T" => exp10 += 12,
            "P" => exp10 += 15,
            "E" => exp10 += 18,
            "Ki" => mul2 = 1 << 10,
            "Mi" => mul2 = 1 << 20,
            "Gi" => mul2 = 1 << 30,
            "Ti" => mul2 = 1 << 40,
            "Pi" => mul2 = 1 << 50,
            "Ei" => mul2 = 1 << 60,
            s if s.starts_with(['e', 'E']) => {
                exp10 = exp10.saturating_add(s[1..].parse::<i32>().ok()?);
            }
            _ => return None,
        }
        let mut value = mantissa.saturating_mul(mul2);
        let scale = exp10.saturating_add(9);
        if scale >= 0 {
            for _ in 0..scale.min(40) {
                value = value.saturating_mul(10);
            }
        } else {
            let mut divisor: i128 = 1;
            for _ in 0..scale.saturating_neg().min(38) {
                divisor = divisor.saturating_mul(10);
            }
            // kube rounds up fractions it cannot hold
            value = value.saturating_add(divisor - 1) / divisor;
        }
        Some(Quantity(if negative { -value } else { value }))
    }

    pub(crate) fn is_negative(self) -> bool {
        self.0 < 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_suffixes_and_orders_values() {
        let q = |s: &str| Quantity::parse(s).expect(s);
        assert_eq!(q("1"), q("1000m"));
        assert_eq!(q("1Ki"), q("1024"));
        assert_eq!(q("1k"), q("1e3"));
        assert_eq!(q("0.5"), q("500m"));
        assert!(q("2") > q("1500m"));
        assert!(q("1Gi") > q("1G"));
        assert!(q("-1").is_negative());
        assert_eq!(q("0"), q("0m"));
        assert!(q("1e2147483647") > q("1E"));
        assert!(!q("1e-2147483648").is_negative());
        for bad in ["", "abc", "1.2.3", "1x", ".", "1e99999999999"] {
            assert_eq!(Quantity::parse(bad), None, "{bad:?}");
        }
    }
}
