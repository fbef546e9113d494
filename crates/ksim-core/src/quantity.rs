//! Kubernetes `resource.Quantity` parsing and arithmetic, as apimachinery
//! parses quantities: a signed decimal number followed by a binary suffix
//! (`Ki Mi Gi Ti Pi Ei`), a decimal suffix (`n u m k M G T P E`) or a decimal
//! exponent (`e3`, `E-2`). Values are kept exactly in nano-units (the finest
//! precision a Quantity has; finer digits round up, as upstream does), so
//! `milli_value()` is what the scheduler uses for cpu and `value()` what it
//! uses for bytes.

use std::fmt;

/// Why a quantity string does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The string is not `<number><suffix>`.
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    FormatWrong,
    /// The suffix is not one Kubernetes knows.
    #[error("unable to parse quantity's suffix")]
    InvalidSuffix,
}

const NANOS_PER_UNIT: i128 = 1_000_000_000;

/// A parsed quantity, exact to the nano-unit (saturating at the i128 range).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Quantity {
    nanos: i128,
}

impl Quantity {
    /// Zero.
    pub const ZERO: Quantity = Quantity { nanos: 0 };

    /// Parses the string form (`100m`, `1.5Gi`, `2e3`, `+4`, `-0.5`).
    pub fn parse(input: &str) -> Result<Self, QuantityError> {
        parse(input)
    }

    /// A quantity of `units` whole units.
    pub fn from_units(units: i64) -> Self {
        Quantity {
            nanos: i128::from(units).saturating_mul(NANOS_PER_UNIT),
        }
    }

    /// A quantity of `milli` thousandths of a unit.
    pub fn from_milli(milli: i64) -> Self {
        Quantity {
            nanos: i128::from(milli).saturating_mul(1_000_000),
        }
    }

    /// The value in nano-units.
    pub fn nanos(&self) -> i128 {
        self.nanos
    }

    /// The value in milli-units, rounded up (apimachinery `MilliValue`),
    /// saturating at the i64 range.
    pub fn milli_value(&self) -> i64 {
        saturate(div_ceil(self.nanos, 1_000_000))
    }

    /// The value in whole units, rounded up (apimachinery `Value`),
    /// saturating at the i64 range.
    pub fn value(&self) -> i64 {
        saturate(div_ceil(self.nanos, NANOS_PER_UNIT))
    }

    /// Whether the quantity is zero.
    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// The sum, saturating.
    pub fn saturating_add(self, other: Quantity) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_add(other.nanos),
        }
    }

    /// The difference, saturating.
    pub fn saturating_sub(self, other: Quantity) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_sub(other.nanos),
        }
    }
}

impl std::str::FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse(s)
    }
}

impl fmt::Display for Quantity {
    /// A plain decimal rendering (`1.5`, `0.1`, `1024`); not the canonical
    /// suffixed form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.nanos < 0 { "-" } else { "" };
        let magnitude = self.nanos.unsigned_abs();
        let units = magnitude / NANOS_PER_UNIT.unsigned_abs();
        let fraction = magnitude % NANOS_PER_UNIT.unsigned_abs();
        if fraction == 0 {
            write!(f, "{sign}{units}")
        } else {
            let digits = format!("{fraction:09}");
            write!(f, "{sign}{units}.{}", digits.trim_end_matches('0'))
        }
    }
}

fn saturate(value: i128) -> i64 {
    i64::try_from(value).unwrap_or(if value < 0 { i64::MIN } else { i64::MAX })
}

/// Division rounding towards positive infinity.
fn div_ceil(numerator: i128, denominator: i128) -> i128 {
    let quotient = numerator / denominator;
    if numerator % denominator > 0 {
        quotient + 1
    } else {
        quotient
    }
}

/// The multiplier a suffix stands for: a power of two and a power of ten.
fn suffix_multiplier(suffix: &str) -> Result<(u32, i32), QuantityError> {
    let multiplier = match suffix {
        "" => (0, 0),
        "Ki" => (10, 0),
        "Mi" => (20, 0),
        "Gi" => (30, 0),
        "Ti" => (40, 0),
        "Pi" => (50, 0),
        "Ei" => (60, 0),
        "n" => (0, -9),
        "u" => (0, -6),
        "m" => (0, -3),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        _ => {
            let exponent = suffix
                .strip_prefix(['e', 'E'])
                .filter(|rest| !rest.is_empty())
                .ok_or(QuantityError::InvalidSuffix)?;
            let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(QuantityError::InvalidSuffix);
            }
            let exponent: i32 = exponent.parse().map_err(|_| QuantityError::InvalidSuffix)?;
            (0, exponent)
        }
    };
    Ok(multiplier)
}

fn parse(input: &str) -> Result<Quantity, QuantityError> {
    if input.is_empty() {
        return Err(QuantityError::FormatWrong);
    }
    let (negative, rest) = match input.as_bytes()[0] {
        b'-' => (true, &input[1..]),
        b'+' => (false, &input[1..]),
        _ => (false, input),
    };
    let number_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_end);
    let (whole, fraction) = match number.split_once('.') {
        Some((whole, fraction)) => {
            if fraction.contains('.') {
                return Err(QuantityError::FormatWrong);
            }
            (whole, fraction)
        }
        None => (number, ""),
    };
    if whole.is_empty() && fraction.is_empty() {
        return Err(QuantityError::FormatWrong);
    }
    let (binary_power, decimal_power) = suffix_multiplier(suffix)?;
    let fraction = fraction.trim_end_matches('0');
    let whole = whole.trim_start_matches('0');
    let overflow = Quantity {
        nanos: if negative { i128::MIN } else { i128::MAX },
    };
    let mut mantissa: i128 = 0;
    for digit in whole.bytes().chain(fraction.bytes()) {
        mantissa = match mantissa
            .checked_mul(10)
            .and_then(|m| m.checked_add(i128::from(digit - b'0')))
        {
            Some(m) => m,
            None => return Ok(overflow),
        };
    }
    if mantissa == 0 {
        return Ok(Quantity::ZERO);
    }
    let Some(mut scaled) = 2i128
        .checked_pow(binary_power)
        .and_then(|factor| mantissa.checked_mul(factor))
    else {
        return Ok(overflow);
    };
    let fraction_digits = i64::try_from(fraction.len()).unwrap_or(i64::MAX);
    let power = i64::from(decimal_power) + 9 - fraction_digits;
    if power >= 0 {
        let Some(factor) = u32::try_from(power)
            .ok()
            .and_then(|p| 10i128.checked_pow(p))
        else {
            return Ok(overflow);
        };
        match scaled.checked_mul(factor) {
            Some(value) => scaled = value,
            None => return Ok(overflow),
        }
    } else {
        // Finer than a nano-unit: round up to the next nano, as upstream.
        scaled = match u32::try_from(-power)
            .ok()
            .and_then(|p| 10i128.checked_pow(p))
        {
            Some(divisor) => div_ceil(scaled, divisor),
            None => 1,
        };
    }
    Ok(Quantity {
        nanos: if negative { -scaled } else { scaled },
    })
}

/// Parses a k8s-openapi `Quantity`, treating one that does not parse as zero
/// (the API server validates quantities before they reach a component).
pub fn parse_or_zero(
    quantity: &k8s_openapi::apimachinery::pkg::api::resource::Quantity,
) -> Quantity {
    parse(&quantity.0).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_suffixes_as_apimachinery() {
        // (input, milli value, value)
        let cases: &[(&str, i64, i64)] = &[
            ("0", 0, 0),
            ("1", 1000, 1),
            ("100m", 100, 1),
            ("1500m", 1500, 2),
            ("0.5", 500, 1),
            (".5", 500, 1),
            ("5.", 5000, 5),
            ("+2", 2000, 2),
            ("-2", -2000, -2),
            ("1Ki", 1_024_000, 1024),
            ("1Mi", 1_048_576_000, 1_048_576),
            ("1.5Gi", 1_610_612_736_000, 1_610_612_736),
            ("1Ti", 1_099_511_627_776_000, 1_099_511_627_776),
            ("1k", 1_000_000, 1000),
            ("1M", 1_000_000_000, 1_000_000),
            ("1G", 1_000_000_000_000, 1_000_000_000),
            ("1e3", 1_000_000, 1000),
            ("1E3", 1_000_000, 1000),
            ("1e-3", 1, 1),
            ("1E", i64::MAX, 1_000_000_000_000_000_000),
            ("1n", 1, 1),
            ("1u", 1, 1),
            ("250u", 1, 1),
            ("0.0001", 1, 1),
            (
                "1.000000000000000000000000000000000000000000000000",
                1000,
                1,
            ),
            (
                "0000000000000000000000000000000000000000000000012",
                12000,
                12,
            ),
            ("200Mi", 209_715_200_000, 209_715_200),
        ];
        for (input, milli, value) in cases {
            let quantity = Quantity::parse(input).expect(input);
            assert_eq!(quantity.milli_value(), *milli, "milli of {input}");
            assert_eq!(quantity.value(), *value, "value of {input}");
        }
    }

    #[test]
    fn malformed_quantities_are_errors() {
        for bad in [
            "", "abc", "1Kb", "1.2.3", "m", "1 Ki", "Ki1", "1e", "1e+", "1ee3", "-", ".", "1Mii",
            "1i", "--1",
        ] {
            assert!(Quantity::parse(bad).is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn huge_quantities_saturate_instead_of_panicking() {
        let huge =
            Quantity::parse("99999999999999999999999999999999999999999999Ei").expect("parses");
        assert_eq!(huge.value(), i64::MAX);
        let big_exponent = Quantity::parse("1e999999").expect("parses");
        assert_eq!(big_exponent.milli_value(), i64::MAX);
        let tiny = Quantity::parse("1e-999999").expect("parses");
        assert_eq!(tiny.nanos(), 1);
        assert!(Quantity::parse("1e99999999999999").is_err());
    }

    #[test]
    fn arithmetic_and_display() {
        let sum = Quantity::parse("100m")
            .expect("valid")
            .saturating_add(Quantity::parse("1.5").expect("valid"));
        assert_eq!(sum.milli_value(), 1600);
        assert_eq!(sum.to_string(), "1.6");
        assert_eq!(Quantity::from_units(3).to_string(), "3");
        assert_eq!(Quantity::from_milli(-250).to_string(), "-0.25");
        assert_eq!(
            sum.saturating_sub(Quantity::from_units(1)).milli_value(),
            600
        );
    }
}
