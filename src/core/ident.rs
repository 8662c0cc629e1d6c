//! Quoting of names and literals for the SQL the extension generates. Every name that reaches
//! generated SQL goes through [`quote_ident`], always quoted, so no name can change the SQL
//! around it, whatever it contains.

pub fn quote_ident(name: &str) -> String {
    let mut s = String::with_capacity(name.len() + 2);
    s.push('"');
    for c in name.chars() {
        if c == '"' {
            s.push('"');
        }
        s.push(c);
    }
    s.push('"');
    s
}

pub fn quote_literal(text: &str) -> String {
    let mut s = String::with_capacity(text.len() + 2);
    if text.contains('\\') {
        s.push('E');
    }
    s.push('\'');
    for c in text.chars() {
        if c == '\'' || c == '\\' {
            s.push(c);
        }
        s.push(c);
    }
    s.push('\'');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_are_doubled() {
        assert_eq!(quote_ident("store"), "\"store\"");
        assert_eq!(quote_ident("Store \"A\""), "\"Store \"\"A\"\"\"");
        assert_eq!(
            quote_ident("x\"; DROP TABLE t; --"),
            "\"x\"\"; DROP TABLE t; --\""
        );
    }

    #[test]
    fn literals_escape_quotes_and_backslashes() {
        assert_eq!(quote_literal("it's"), "'it''s'");
        assert_eq!(quote_literal("a\\b"), "E'a\\\\b'");
    }
}
