//! The protobuf wire format: a reader of (field number, value) pairs over a byte slice that
//! never reads out of bounds and reports malformed input as an error.

/// One field value as it is on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WireValue<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32(u32),
}

impl WireValue<'_> {
    pub(super) fn type_name(&self) -> &'static str {
        match self {
            WireValue::Varint(_) => "varint",
            WireValue::Fixed64(_) => "fixed64",
            WireValue::Bytes(_) => "length-delimited",
            WireValue::Fixed32(_) => "fixed32",
        }
    }
}

/// Reads the fields of one message in order.
#[derive(Debug)]
pub(super) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Self {
        Reader { rest: bytes }
    }

    /// Reads one varint.
    pub(super) fn varint(&mut self) -> Result<u64, String> {
        let mut value: u64 = 0;
        for index in 0..10 {
            let Some((&byte, rest)) = self.rest.split_first() else {
                return Err("truncated varint".to_string());
            };
            self.rest = rest;
            value |= u64::from(byte & 0x7f) << (7 * index);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("varint longer than 10 bytes".to_string())
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], String> {
        if len > self.rest.len() {
            return Err(format!(
                "truncated field: {len} bytes announced, {} left",
                self.rest.len()
            ));
        }
        let (head, rest) = self.rest.split_at(len);
        self.rest = rest;
        Ok(head)
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let bytes = self.take(N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// The next field, or `None` at the end of the message.
    pub(super) fn next_field(&mut self) -> Result<Option<(u32, WireValue<'a>)>, String> {
        if self.rest.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let number = u32::try_from(key >> 3)
            .ok()
            .filter(|number| *number != 0)
            .ok_or_else(|| format!("invalid field number {}", key >> 3))?;
        let value = match key & 7 {
            0 => WireValue::Varint(self.varint()?),
            1 => WireValue::Fixed64(u64::from_le_bytes(self.fixed::<8>()?)),
            2 => {
                let len = usize::try_from(self.varint()?)
                    .map_err(|_| "field length out of range".to_string())?;
                WireValue::Bytes(self.take(len)?)
            }
            5 => WireValue::Fixed32(u32::from_le_bytes(self.fixed::<4>()?)),
            other => return Err(format!("unsupported wire type {other} for field {number}")),
        };
        Ok(Some((number, value)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(bytes: &[u8]) -> Result<Vec<(u32, WireValue<'_>)>, String> {
        let mut reader = Reader::new(bytes);
        let mut out = Vec::new();
        while let Some(field) = reader.next_field()? {
            out.push(field);
        }
        Ok(out)
    }

    #[test]
    fn reads_every_wire_type() {
        let bytes = [
            0x08, 0x96, 0x01, // 1: varint 150
            0x11, 1, 0, 0, 0, 0, 0, 0, 0, // 2: fixed64 1
            0x1a, 0x02, b'h', b'i', // 3: bytes "hi"
            0x25, 2, 0, 0, 0, // 4: fixed32 2
        ];
        assert_eq!(
            fields(&bytes),
            Ok(vec![
                (1, WireValue::Varint(150)),
                (2, WireValue::Fixed64(1)),
                (3, WireValue::Bytes(b"hi")),
                (4, WireValue::Fixed32(2)),
            ])
        );
    }

    #[test]
    fn malformed_input_is_an_error() {
        for (bytes, why) in [
            (&[0x08][..], "truncated varint"),
            (&[0x0a, 0x05, b'a'][..], "truncated field"),
            (&[0x09, 1, 2][..], "truncated field"),
            (&[0x0b][..], "unsupported wire type 3"),
            (&[0x00, 0x01][..], "invalid field number 0"),
            (
                &[
                    0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                ][..],
                "varint longer",
            ),
        ] {
            let err = fields(bytes).expect_err(why);
            assert!(err.contains(why), "{err} should mention {why}");
        }
    }

    #[test]
    fn negative_int32_is_a_ten_byte_varint() {
        let bytes = [
            0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ];
        assert_eq!(fields(&bytes), Ok(vec![(1, WireValue::Varint(u64::MAX))]));
    }
}
