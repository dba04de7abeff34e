//! The lexer: splits template text into text runs and action tokens, applying the
//! `{{-`/`-}}` whitespace trimming and dropping `{{/* comments */}}` as Go's lexer does.

/// What a token is.
#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    Text(String),
    LeftDelim,
    RightDelim,
    Space,
    LeftParen,
    RightParen,
    Pipe,
    Declare,
    Assign,
    Comma,
    Dot,
    /// `.name` (the name without its dot).
    Field(String),
    /// `$name` including the `$`.
    Variable(String),
    Ident(String),
    Keyword(&'static str),
    Bool(bool),
    Nil,
    Number(String),
    CharConst(String),
    /// A quoted string, already unquoted.
    Str(String),
    Eof,
}

/// A token and its byte offset in the template text.
#[derive(Clone, Debug)]
pub struct Token {
    pub tok: Tok,
    pub pos: usize,
}

/// The byte offset and message of a lexical error.
pub type LexError = (usize, String);

const KEYWORDS: &[&str] = &[
    "block", "break", "continue", "define", "else", "end", "if", "range", "template", "with",
];

fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

fn is_alnum(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

/// Lexes the whole text.
pub fn lex(input: &str) -> Result<Vec<Token>, LexError> {
    let mut l = Lexer {
        s: input,
        pos: 0,
        toks: Vec::new(),
        parens: 0,
    };
    l.run()?;
    Ok(l.toks)
}

struct Lexer<'a> {
    s: &'a str,
    pos: usize,
    toks: Vec<Token>,
    parens: usize,
}

impl Lexer<'_> {
    fn rest(&self) -> &str {
        &self.s[self.pos..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn emit(&mut self, tok: Tok, pos: usize) {
        self.toks.push(Token { tok, pos });
    }

    fn run(&mut self) -> Result<(), LexError> {
        loop {
            let start = self.pos;
            match self.rest().find("{{") {
                None => {
                    if start < self.s.len() {
                        self.emit(Tok::Text(self.rest().to_string()), start);
                    }
                    self.pos = self.s.len();
                    self.emit(Tok::Eof, self.pos);
                    return Ok(());
                }
                Some(x) => {
                    let delim = start + x;
                    let after = &self.s[delim + 2..];
                    let trim = has_left_trim(after);
                    let mut text = &self.s[start..delim];
                    if trim {
                        text = text.trim_end_matches(is_space);
                    }
                    if !text.is_empty() {
                        self.emit(Tok::Text(text.to_string()), start);
                    }
                    self.pos = delim + 2 + if trim { 2 } else { 0 };
                    self.left_delim(delim, trim)?;
                }
            }
        }
    }

    /// After `{{` (and a trim marker): a comment, or an action.
    fn left_delim(&mut self, delim: usize, trim: bool) -> Result<(), LexError> {
        if self.rest().starts_with("/*") {
            return self.comment(delim);
        }
        let _ = trim;
        self.emit(Tok::LeftDelim, delim);
        self.parens = 0;
        self.inside_action()
    }

    fn comment(&mut self, delim: usize) -> Result<(), LexError> {
        let Some(end) = self.rest().find("*/") else {
            return Err((delim, "unclosed comment".into()));
        };
        self.pos += end + 2;
        let (close, trim) = self.at_right_delim();
        if !close {
            return Err((delim, "comment ends before closing delimiter".into()));
        }
        self.pos += if trim { 4 } else { 2 };
        if trim {
            self.skip_leading_space();
        }
        Ok(())
    }

    fn skip_leading_space(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start_matches(is_space).len();
    }

    /// Is the input at `}}` or ` -}}`? (The space before `-` belongs to the caller.)
    fn at_right_delim(&self) -> (bool, bool) {
        let r = self.rest();
        if r.starts_with(" -}}")
            || r.starts_with("\t-}}")
            || r.starts_with("\n-}}")
            || r.starts_with("\r-}}")
        {
            return (true, true);
        }
        (r.starts_with("}}"), false)
    }

    fn inside_action(&mut self) -> Result<(), LexError> {
        loop {
            let (close, trim) = self.at_right_delim();
            if close {
                if self.parens > 0 {
                    return Err((self.pos, "unclosed left paren".into()));
                }
                let p = self.pos;
                self.pos += if trim { 4 } else { 2 };
                self.emit(Tok::RightDelim, p);
                if trim {
                    self.skip_leading_space();
                }
                return Ok(());
            }
            let p = self.pos;
            let Some(c) = self.peek() else {
                return Err((p, "unclosed action".into()));
            };
            if is_space(c) {
                self.space();
                continue;
            }
            self.pos += c.len_utf8();
            match c {
                '=' => self.emit(Tok::Assign, p),
                ':' => {
                    if self.peek() != Some('=') {
                        return Err((p, "expected :=".into()));
                    }
                    self.pos += 1;
                    self.emit(Tok::Declare, p);
                }
                '|' => self.emit(Tok::Pipe, p),
                ',' => self.emit(Tok::Comma, p),
                '"' => self.quote(p)?,
                '`' => self.raw_quote(p)?,
                '\'' => self.char_const(p)?,
                '$' => self.variable(p)?,
                '(' => {
                    self.parens += 1;
                    self.emit(Tok::LeftParen, p);
                }
                ')' => {
                    if self.parens == 0 {
                        return Err((p, "unexpected right paren".into()));
                    }
                    self.parens -= 1;
                    self.emit(Tok::RightParen, p);
                }
                '.' => {
                    if self.peek().is_some_and(|c| c.is_ascii_digit()) {
                        self.pos = p;
                        self.number(p)?;
                    } else {
                        self.field(p)?;
                    }
                }
                '+' | '-' | '0'..='9' => {
                    self.pos = p;
                    self.number(p)?;
                }
                c if is_alnum(c) => {
                    self.pos = p;
                    self.identifier(p)?;
                }
                c => {
                    return Err((
                        p,
                        format!("unrecognized character in action: {}", go_rune(c)),
                    ))
                }
            }
        }
    }

    fn space(&mut self) {
        let p = self.pos;
        while let Some(c) = self.peek() {
            // A space that starts ` -}}` ends the run: it belongs to the delimiter.
            if self.at_right_delim().1 {
                break;
            }
            if !is_space(c) {
                break;
            }
            self.pos += 1;
        }
        if self.pos > p {
            self.emit(Tok::Space, p);
        } else if self.at_right_delim().1 {
            // A lone space before `-}}` separates nothing; the delimiter consumes it.
        }
    }

    fn at_terminator(&self) -> bool {
        match self.peek() {
            None => true,
            Some(c) if is_space(c) => true,
            Some('.' | ',' | '|' | ':' | ')' | '(' | '=') => true,
            _ => self.rest().starts_with("}}"),
        }
    }

    fn take_alnum(&mut self) -> &str {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if !is_alnum(c) {
                break;
            }
            self.pos += c.len_utf8();
        }
        &self.s[start..self.pos]
    }

    fn identifier(&mut self, p: usize) -> Result<(), LexError> {
        let word = self.take_alnum().to_string();
        if !self.at_terminator() {
            return Err((
                self.pos,
                format!("bad character {}", go_rune(self.peek().unwrap_or(' '))),
            ));
        }
        let tok = match word.as_str() {
            "true" => Tok::Bool(true),
            "false" => Tok::Bool(false),
            "nil" => Tok::Nil,
            w => match KEYWORDS.iter().find(|k| **k == w) {
                Some(k) => Tok::Keyword(k),
                None => Tok::Ident(word),
            },
        };
        self.emit(tok, p);
        Ok(())
    }

    fn field(&mut self, p: usize) -> Result<(), LexError> {
        let name = self.take_alnum().to_string();
        if name.is_empty() {
            if !self.at_terminator() {
                return Err((
                    self.pos,
                    format!("bad character {}", go_rune(self.peek().unwrap_or(' '))),
                ));
            }
            self.emit(Tok::Dot, p);
            return Ok(());
        }
        if !self.at_terminator() {
            return Err((
                self.pos,
                format!("bad character {}", go_rune(self.peek().unwrap_or(' '))),
            ));
        }
        self.emit(Tok::Field(name), p);
        Ok(())
    }

    fn variable(&mut self, p: usize) -> Result<(), LexError> {
        let name = format!("${}", self.take_alnum());
        if !self.at_terminator() {
            return Err((
                self.pos,
                format!("bad character {}", go_rune(self.peek().unwrap_or(' '))),
            ));
        }
        self.emit(Tok::Variable(name), p);
        Ok(())
    }

    /// Scans a number the way Go's lexer does (sign, base prefix, digits with `_`,
    /// fraction, exponent); the parser decides later what it means.
    fn number(&mut self, p: usize) -> Result<(), LexError> {
        let b = self.s.as_bytes();
        let mut i = self.pos;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        let mut digits: &str = "0123456789_";
        let mut exp: &[u8] = b"eE";
        if i + 1 < b.len() && b[i] == b'0' {
            match b[i + 1] {
                b'x' | b'X' => {
                    i += 2;
                    digits = "0123456789abcdefABCDEF_";
                    exp = b"pP";
                }
                b'o' | b'O' => {
                    i += 2;
                    digits = "01234567_";
                    exp = b"";
                }
                b'b' | b'B' => {
                    i += 2;
                    digits = "01_";
                    exp = b"";
                }
                _ => {}
            }
        }
        let accept = |i: &mut usize, set: &str| {
            while *i < b.len() && set.as_bytes().contains(&b[*i]) {
                *i += 1;
            }
        };
        accept(&mut i, digits);
        if i < b.len() && b[i] == b'.' {
            i += 1;
            accept(&mut i, digits);
        }
        if !exp.is_empty() && i < b.len() && exp.contains(&b[i]) {
            i += 1;
            if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
                i += 1;
            }
            accept(&mut i, "0123456789_");
        }
        if i < b.len() && b[i] == b'i' {
            i += 1;
        }
        self.pos = i;
        let text = &self.s[p..i];
        if self.peek().is_some_and(is_alnum) || text == "+" || text == "-" {
            let mut end = i;
            while end < b.len() && (b[end] as char).is_ascii_alphanumeric() {
                end += 1;
            }
            return Err((
                p,
                format!("bad number syntax: \"{}\"", &self.s[p..end.max(i)]),
            ));
        }
        self.emit(Tok::Number(text.to_string()), p);
        Ok(())
    }

    fn quote(&mut self, p: usize) -> Result<(), LexError> {
        let b = self.s.as_bytes();
        let mut i = self.pos;
        loop {
            match b.get(i) {
                None | Some(b'\n') => return Err((p, "unterminated quoted string".into())),
                Some(b'\\') => i += 2,
                Some(b'"') => break,
                Some(_) => i += 1,
            }
        }
        let raw = &self.s[p + 1..i];
        self.pos = i + 1;
        let s = unquote(raw, '"').map_err(|e| (p, e))?;
        self.emit(Tok::Str(s), p);
        Ok(())
    }

    fn raw_quote(&mut self, p: usize) -> Result<(), LexError> {
        let Some(end) = self.rest().find('`') else {
            return Err((p, "unterminated raw quoted string".into()));
        };
        let s = self.rest()[..end].replace('\r', "");
        self.pos += end + 1;
        self.emit(Tok::Str(s), p);
        Ok(())
    }

    fn char_const(&mut self, p: usize) -> Result<(), LexError> {
        let b = self.s.as_bytes();
        let mut i = self.pos;
        loop {
            match b.get(i) {
                None | Some(b'\n') => return Err((p, "unterminated character constant".into())),
                Some(b'\\') => i += 2,
                Some(b'\'') => break,
                Some(_) => i += 1,
            }
        }
        let raw = &self.s[p + 1..i.min(self.s.len())];
        self.pos = i + 1;
        let s = unquote(raw, '\'').map_err(|e| (p, e))?;
        let mut cs = s.chars();
        match (cs.next(), cs.next()) {
            (Some(c), None) => self.emit(Tok::CharConst((c as u32).to_string()), p),
            _ => return Err((p, format!("malformed character constant: '{raw}'"))),
        }
        Ok(())
    }
}

fn has_left_trim(after: &str) -> bool {
    let mut cs = after.chars();
    cs.next() == Some('-') && cs.next().is_some_and(is_space)
}

/// `%#U`-style rune description used in Go's lexer errors.
fn go_rune(c: char) -> String {
    format!("U+{:04X} '{}'", c as u32, c)
}

/// Interprets Go escapes in the body of a `"..."` (or `'...'`) literal.
pub fn unquote(raw: &str, q: char) -> Result<String, String> {
    let bad = || format!("invalid syntax in {q}{raw}{q}");
    let mut out = String::new();
    let mut cs = raw.chars().peekable();
    while let Some(c) = cs.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let e = cs.next().ok_or_else(bad)?;
        let hex =
            |cs: &mut std::iter::Peekable<std::str::Chars>, n: usize| -> Result<u32, String> {
                let mut v = 0u32;
                for _ in 0..n {
                    let d = cs.next().and_then(|c| c.to_digit(16)).ok_or_else(bad)?;
                    v = v * 16 + d;
                }
                Ok(v)
            };
        match e {
            'a' => out.push('\u{7}'),
            'b' => out.push('\u{8}'),
            'f' => out.push('\u{c}'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'v' => out.push('\u{b}'),
            '\\' => out.push('\\'),
            c if c == q => out.push(c),
            'x' => {
                let v = hex(&mut cs, 2)?;
                // Go strings are bytes; a lone high byte has no UTF-8 form here.
                out.push(char::from_u32(v).filter(|_| v < 0x80).unwrap_or('\u{FFFD}'));
            }
            'u' => out.push(char::from_u32(hex(&mut cs, 4)?).ok_or_else(bad)?),
            'U' => out.push(char::from_u32(hex(&mut cs, 8)?).ok_or_else(bad)?),
            '0'..='7' => {
                let mut v = e.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    v = v * 8 + cs.next().and_then(|c| c.to_digit(8)).ok_or_else(bad)?;
                }
                if v > 255 {
                    return Err(bad());
                }
                out.push(char::from_u32(v).filter(|_| v < 0x80).unwrap_or('\u{FFFD}'));
            }
            _ => return Err(bad()),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(s: &str) -> Vec<Tok> {
        lex(s)
            .map(|t| t.into_iter().map(|t| t.tok).collect())
            .unwrap_or_default()
    }

    #[test]
    fn trims_and_comments() {
        assert_eq!(
            kinds("a  {{- /* c */ -}}  b"),
            vec![Tok::Text("a".into()), Tok::Text("b".into()), Tok::Eof]
        );
        assert_eq!(
            kinds("{{ .a.b }}"),
            vec![
                Tok::LeftDelim,
                Tok::Space,
                Tok::Field("a".into()),
                Tok::Field("b".into()),
                Tok::Space,
                Tok::RightDelim,
                Tok::Eof
            ]
        );
    }

    #[test]
    fn escapes() {
        assert_eq!(
            unquote(r"a\n\t\x41\u00e9\101", '"').unwrap_or_default(),
            "a\n\tAéA"
        );
        assert!(unquote(r"\q", '"').is_err());
    }
}
