//! The fields of an object that something reads, as a tree of paths: what
//! the Stages' selectors, weights and delays (and the simulator itself) look
//! at, so that an object can be kept as just those fields.

use std::collections::BTreeMap;

/// A tree of object fields: everything below a node, or some of its fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadFields {
    /// The whole value.
    All,
    /// These fields of an object (and nothing else of it).
    Some(BTreeMap<String, ReadFields>),
}

impl Default for ReadFields {
    fn default() -> Self {
        Self::Some(BTreeMap::new())
    }
}

impl ReadFields {
    /// Nothing.
    pub fn none() -> Self {
        Self::default()
    }

    /// Adds the value at `path` (all of it; an empty path is the whole value).
    pub fn add<S: AsRef<str>>(&mut self, path: &[S]) {
        let Self::Some(fields) = self else {
            return;
        };
        match path.split_first() {
            None => *self = Self::All,
            Some((first, rest)) => fields
                .entry(first.as_ref().to_owned())
                .or_default()
                .add(rest),
        }
    }

    /// Adds everything `other` holds.
    pub fn merge(&mut self, other: &ReadFields) {
        match (&mut *self, other) {
            (Self::All, _) => {}
            (_, Self::All) => *self = Self::All,
            (Self::Some(mine), Self::Some(theirs)) => {
                for (name, fields) in theirs {
                    mine.entry(name.clone()).or_default().merge(fields);
                }
            }
        }
    }

    /// What is read of field `name`, if anything.
    pub fn field(&self, name: &str) -> Option<&ReadFields> {
        match self {
            Self::All => Some(self),
            Self::Some(fields) => fields.get(name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_add_up_to_a_tree() {
        let mut fields = ReadFields::none();
        fields.add(&["status", "phase"]);
        fields.add(&["status", "conditions"]);
        fields.add(&["metadata", "name"]);
        assert_eq!(fields.field("spec"), None);
        let status = fields.field("status").expect("status is read");
        assert_eq!(status.field("phase"), Some(&ReadFields::All));
        assert_eq!(status.field("podIP"), None);
        fields.add(&["status"]);
        assert_eq!(fields.field("status"), Some(&ReadFields::All));
        // A longer path under a whole value changes nothing.
        fields.add(&["status", "phase", "x"]);
        assert_eq!(fields.field("status"), Some(&ReadFields::All));
        let mut other = ReadFields::none();
        other.add(&["spec", "nodeName"]);
        fields.merge(&other);
        assert!(fields.field("spec").is_some());
        fields.add::<&str>(&[]);
        assert_eq!(fields, ReadFields::All);
        fields.merge(&other);
        assert_eq!(fields, ReadFields::All);
    }
}
