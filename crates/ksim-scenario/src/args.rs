//! Command lines of `kubectl:` and `ksim:` steps: a string split as a POSIX
//! shell splits words (single and double quotes, backslash escapes), with no
//! expansion of any kind.

/// Splits `line` into words the way `sh` would (quotes and backslashes only).
pub fn split_args(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if let Some(done) = word.take() {
                    words.push(done);
                }
            }
            '\'' => {
                let current = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => current.push(c),
                        None => return Err("unclosed single quote".to_string()),
                    }
                }
            }
            '"' => {
                let current = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => current.push(c),
                            Some(c) => {
                                current.push('\\');
                                current.push(c);
                            }
                            None => return Err("unclosed double quote".to_string()),
                        },
                        Some(c) => current.push(c),
                        None => return Err("unclosed double quote".to_string()),
                    }
                }
            }
            '\\' => match chars.next() {
                Some(c) => word.get_or_insert_with(String::new).push(c),
                None => return Err("trailing backslash".to_string()),
            },
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    if let Some(done) = word {
        words.push(done);
    }
    Ok(words)
}

/// Quotes a word so that [`split_args`] gives it back.
pub(crate) fn quote(word: &str) -> String {
    if !word.is_empty()
        && !word.contains(|c: char| c.is_whitespace() || "'\"\\$`|&;<>()*?#~".contains(c))
    {
        return word.to_string();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_quotes_and_escapes() {
        assert_eq!(
            split_args(r#"label nodes node-0  number=even 'a b' "c \"d\"" e\ f ''"#)
                .expect("splits"),
            [
                "label",
                "nodes",
                "node-0",
                "number=even",
                "a b",
                r#"c "d""#,
                "e f",
                ""
            ]
        );
        assert!(split_args("get 'pods").is_err());
        for word in ["plain", "a b", "it's", ".cpu=\"1\"", ""] {
            assert_eq!(split_args(&quote(word)).expect("splits"), [word], "{word}");
        }
        assert!(split_args("get \"pods").is_err());
    }
}
