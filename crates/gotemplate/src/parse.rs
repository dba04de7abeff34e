//! The parser: turns tokens into the tree Go's `text/template/parse` builds (lists of
//! text, actions, if/range/with, template invocations; pipelines of commands of operands),
//! with Go's parse-time checks (functions must exist, variables must be declared,
//! `break`/`continue` only inside `range`, literals cannot be piped into).

use std::collections::HashMap;

use crate::lex::{lex, Tok, Token};

/// Control-structure and paren nesting beyond which parsing stops (Go's own bound is
/// larger, but recursion on our stack must stay shallow).
const MAX_DEPTH: usize = 200;

/// A number literal with every interpretation Go's parser derives from it.
#[derive(Clone, Debug, PartialEq)]
pub struct Number {
    pub text: String,
    pub int: Option<i64>,
    pub float: Option<f64>,
    pub is_uint: bool,
    /// `'a'` constants and hex integers are never taken as floats for `interface{}`.
    pub is_char: bool,
}

#[derive(Clone, Debug)]
pub enum ArgKind {
    Dot,
    Nil,
    Bool(bool),
    Num(Number),
    Str(String),
    /// `.a.b`
    Field(Vec<String>),
    /// `$x.a.b`
    Var(String, Vec<String>),
    /// A function name.
    Ident(String),
    Pipe(Box<Pipe>),
    /// `(pipe).a.b` or `fn.a`
    Chain(Box<Arg>, Vec<String>),
}

/// An operand with its position.
#[derive(Clone, Debug)]
pub struct Arg {
    pub pos: usize,
    pub kind: ArgKind,
}

#[derive(Clone, Debug)]
pub struct Cmd {
    pub pos: usize,
    pub args: Vec<Arg>,
}

#[derive(Clone, Debug)]
pub struct Pipe {
    pub pos: usize,
    pub is_assign: bool,
    pub decl: Vec<String>,
    pub cmds: Vec<Cmd>,
}

/// Which branching node an [`Node::Branch`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BranchKind {
    If,
    Range,
    With,
}

#[derive(Clone, Debug)]
pub enum Node {
    Text(String),
    Action(Pipe),
    Branch {
        kind: BranchKind,
        pipe: Pipe,
        list: Vec<Node>,
        else_list: Option<Vec<Node>>,
    },
    Template {
        pos: usize,
        name: String,
        pipe: Option<Pipe>,
    },
    Break,
    Continue,
}

/// The templates defined by one text: the main one under its name, plus `define`/`block`s.
pub type Trees = HashMap<String, Vec<Node>>;

/// A parse error: byte offset and message.
pub type ParseError = (usize, String);

/// Parses `text`; `has_func` says whether a function name exists.
pub fn parse(name: &str, text: &str, has_func: &dyn Fn(&str) -> bool) -> Result<Trees, ParseError> {
    let toks = lex(text)?;
    let mut p = Parser {
        toks,
        i: 0,
        vars: vec!["$".into()],
        range_depth: 0,
        depth: 0,
        has_func,
        trees: HashMap::new(),
    };
    let root = p.top_level()?;
    add_tree(&mut p.trees, name, root, 0)?;
    Ok(p.trees)
}

/// Go's rule for adding a tree: an empty (whitespace-only) tree never replaces a
/// non-empty one; two non-empty definitions in one parse are an error.
fn add_tree(trees: &mut Trees, name: &str, list: Vec<Node>, pos: usize) -> Result<(), ParseError> {
    match trees.get(name) {
        Some(old) if !is_empty(old) => {
            if is_empty(&list) {
                Ok(())
            } else {
                Err((
                    pos,
                    format!("template: multiple definition of template \"{name}\""),
                ))
            }
        }
        _ => {
            trees.insert(name.to_string(), list);
            Ok(())
        }
    }
}

fn is_empty(list: &[Node]) -> bool {
    list.iter().all(|n| matches!(n, Node::Text(t) if t.trim_matches(|c: char| c.is_ascii_whitespace()).is_empty()))
}

struct Parser<'a> {
    toks: Vec<Token>,
    i: usize,
    vars: Vec<String>,
    range_depth: usize,
    depth: usize,
    has_func: &'a dyn Fn(&str) -> bool,
    trees: Trees,
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Text(s) => format!("text {s:?}"),
        Tok::LeftDelim => "<left delim>".into(),
        Tok::RightDelim => "<right delim>".into(),
        Tok::Space => "space".into(),
        Tok::LeftParen => "<(>".into(),
        Tok::RightParen => "<)>".into(),
        Tok::Pipe => "<|>".into(),
        Tok::Declare => "<:=>".into(),
        Tok::Assign => "<=>".into(),
        Tok::Comma => "<,>".into(),
        Tok::Dot => "<.>".into(),
        Tok::Field(f) => format!("field <.{f}>"),
        Tok::Variable(v) => format!("variable <{v}>"),
        Tok::Ident(i) => format!("identifier <{i}>"),
        Tok::Keyword(k) => format!("<{k}>"),
        Tok::Bool(b) => format!("<{b}>"),
        Tok::Nil => "<nil>".into(),
        Tok::Number(n) | Tok::CharConst(n) => format!("number <{n}>"),
        Tok::Str(s) => format!("string {s:?}"),
        Tok::Eof => "EOF".into(),
    }
}

impl Parser<'_> {
    fn peek(&self) -> &Token {
        let last = self.toks.len().saturating_sub(1);
        &self.toks[self.i.min(last)]
    }

    fn next(&mut self) -> Token {
        let t = self.peek().clone();
        if self.i < self.toks.len() {
            self.i += 1;
        }
        t
    }

    fn skip_space(&mut self) {
        while self.peek().tok == Tok::Space {
            self.i += 1;
        }
    }

    fn peek_non_space(&mut self) -> Token {
        self.skip_space();
        self.peek().clone()
    }

    fn next_non_space(&mut self) -> Token {
        self.skip_space();
        self.next()
    }

    fn unexpected<T>(&self, t: &Token, context: &str) -> Result<T, ParseError> {
        Err((
            t.pos,
            format!("unexpected {} in {}", describe(&t.tok), context),
        ))
    }

    fn expect_right_delim(&mut self, context: &str) -> Result<(), ParseError> {
        let t = self.next_non_space();
        if t.tok != Tok::RightDelim {
            return self.unexpected(&t, context);
        }
        Ok(())
    }

    fn top_level(&mut self) -> Result<Vec<Node>, ParseError> {
        let mut root = Vec::new();
        while self.peek().tok != Tok::Eof {
            if self.peek().tok == Tok::LeftDelim {
                let save = self.i;
                self.i += 1;
                if self.next_non_space().tok == Tok::Keyword("define") {
                    self.definition()?;
                    continue;
                }
                self.i = save;
            }
            match self.text_or_action()? {
                Item::Node(n) => root.push(n),
                Item::End(pos) => return Err((pos, "unexpected {{end}}".into())),
                Item::Else(pos, _) => return Err((pos, "unexpected {{else}}".into())),
            }
        }
        Ok(root)
    }

    fn definition(&mut self) -> Result<(), ParseError> {
        let t = self.next_non_space();
        let Tok::Str(name) = t.tok else {
            return self.unexpected(&t, "define clause");
        };
        self.expect_right_delim("define clause")?;
        let saved = std::mem::replace(&mut self.vars, vec!["$".into()]);
        let (list, end) = self.item_list()?;
        self.vars = saved;
        match end {
            Item::End(_) => add_tree(&mut self.trees, &name, list, t.pos),
            _ => Err((t.pos, "unexpected {{else}} in define".into())),
        }
    }

    /// Parses nodes up to `{{end}}` or `{{else}}`, which it returns as the terminator.
    fn item_list(&mut self) -> Result<(Vec<Node>, Item), ParseError> {
        let mut list = Vec::new();
        while self.peek_non_space().tok != Tok::Eof {
            match self.text_or_action()? {
                Item::Node(n) => list.push(n),
                end => return Ok((list, end)),
            }
        }
        Err((self.peek().pos, "unexpected EOF".into()))
    }

    fn text_or_action(&mut self) -> Result<Item, ParseError> {
        let t = self.next_non_space();
        match t.tok {
            Tok::Text(s) => Ok(Item::Node(Node::Text(s))),
            Tok::LeftDelim => {
                self.depth += 1;
                if self.depth > MAX_DEPTH {
                    return Err((t.pos, "template nested too deeply".into()));
                }
                let r = self.action();
                self.depth -= 1;
                r
            }
            _ => self.unexpected(&t, "input"),
        }
    }

    fn action(&mut self) -> Result<Item, ParseError> {
        let t = self.peek_non_space();
        if let Tok::Keyword(k) = t.tok {
            self.next();
            return match k {
                "block" => self.block(t.pos).map(Item::Node),
                "break" | "continue" => self.break_continue(k, t.pos).map(Item::Node),
                "else" => self.else_control(t.pos),
                "end" => {
                    self.expect_right_delim("end")?;
                    Ok(Item::End(t.pos))
                }
                "if" => self.control(BranchKind::If, t.pos).map(Item::Node),
                "range" => self.control(BranchKind::Range, t.pos).map(Item::Node),
                "with" => self.control(BranchKind::With, t.pos).map(Item::Node),
                "template" => self.template(t.pos).map(Item::Node),
                _ => self.unexpected(&t, "command"),
            };
        }
        let pipe = self.pipeline("command", Tok::RightDelim)?;
        Ok(Item::Node(Node::Action(pipe)))
    }

    fn break_continue(&mut self, k: &str, pos: usize) -> Result<Node, ParseError> {
        let t = self.next_non_space();
        if t.tok != Tok::RightDelim {
            return self.unexpected(&t, &format!("{{{{{k}}}}}"));
        }
        if self.range_depth == 0 {
            return Err((pos, format!("{{{{{k}}}}} outside {{{{range}}}}")));
        }
        Ok(if k == "break" {
            Node::Break
        } else {
            Node::Continue
        })
    }

    fn else_control(&mut self, pos: usize) -> Result<Item, ParseError> {
        let t = self.peek_non_space();
        match t.tok {
            // `else if` / `else with`: the keyword is left for the enclosing control.
            Tok::Keyword(k @ ("if" | "with")) => Ok(Item::Else(pos, Some(k))),
            _ => {
                self.expect_right_delim("else")?;
                Ok(Item::Else(pos, None))
            }
        }
    }

    fn control(&mut self, kind: BranchKind, _pos: usize) -> Result<Node, ParseError> {
        let nvars = self.vars.len();
        let context = match kind {
            BranchKind::If => "if",
            BranchKind::Range => "range",
            BranchKind::With => "with",
        };
        let pipe = self.pipeline(context, Tok::RightDelim)?;
        if kind == BranchKind::Range {
            self.range_depth += 1;
        }
        let r = self.item_list();
        if kind == BranchKind::Range {
            self.range_depth -= 1;
        }
        let (list, end) = r?;
        let mut else_list = None;
        match end {
            Item::End(_) => {}
            Item::Else(epos, chained) => {
                let chain_ok = match (kind, chained) {
                    (BranchKind::If, Some("if")) | (BranchKind::With, Some("with")) => true,
                    (_, None) => false,
                    _ => {
                        return Err((
                            epos,
                            format!("unexpected <{}> in {context}", chained.unwrap_or("else")),
                        ))
                    }
                };
                if chain_ok {
                    self.next_non_space();
                    self.depth += 1;
                    if self.depth > MAX_DEPTH {
                        return Err((epos, "template nested too deeply".into()));
                    }
                    let inner = self.control(kind, epos);
                    self.depth -= 1;
                    else_list = Some(vec![inner?]);
                } else {
                    let (l, e) = self.item_list()?;
                    if !matches!(e, Item::End(_)) {
                        return Err((epos, "expected end; found {{else}}".into()));
                    }
                    else_list = Some(l);
                }
            }
            Item::Node(_) => {}
        }
        self.vars.truncate(nvars);
        Ok(Node::Branch {
            kind,
            pipe,
            list,
            else_list,
        })
    }

    fn template_name(&mut self, context: &str) -> Result<String, ParseError> {
        let t = self.next_non_space();
        match t.tok {
            Tok::Str(s) => Ok(s),
            _ => self.unexpected(&t, context),
        }
    }

    fn template(&mut self, pos: usize) -> Result<Node, ParseError> {
        let name = self.template_name("template clause")?;
        let pipe = if self.peek_non_space().tok == Tok::RightDelim {
            self.next();
            None
        } else {
            Some(self.pipeline("template clause", Tok::RightDelim)?)
        };
        Ok(Node::Template { pos, name, pipe })
    }

    fn block(&mut self, pos: usize) -> Result<Node, ParseError> {
        let name = self.template_name("block clause")?;
        let pipe = self.pipeline("block clause", Tok::RightDelim)?;
        let saved = std::mem::replace(&mut self.vars, vec!["$".into()]);
        let saved_range = std::mem::replace(&mut self.range_depth, 0);
        let r = self.item_list();
        self.vars = saved;
        self.range_depth = saved_range;
        let (list, end) = r?;
        if !matches!(end, Item::End(_)) {
            return Err((pos, "unexpected {{else}} in block clause".into()));
        }
        add_tree(&mut self.trees, &name, list, pos)?;
        Ok(Node::Template {
            pos,
            name,
            pipe: Some(pipe),
        })
    }

    fn pipeline(&mut self, context: &str, end: Tok) -> Result<Pipe, ParseError> {
        let start = self.peek_non_space();
        let mut pipe = Pipe {
            pos: start.pos,
            is_assign: false,
            decl: Vec::new(),
            cmds: Vec::new(),
        };
        self.declarations(&mut pipe, context)?;
        loop {
            let t = self.next_non_space();
            if t.tok == end {
                self.check_pipeline(&pipe, context, t.pos)?;
                return Ok(pipe);
            }
            match t.tok {
                Tok::Bool(_)
                | Tok::CharConst(_)
                | Tok::Dot
                | Tok::Field(_)
                | Tok::Ident(_)
                | Tok::Number(_)
                | Tok::Nil
                | Tok::Str(_)
                | Tok::Variable(_)
                | Tok::LeftParen => {
                    self.i -= 1;
                    let cmd = self.command()?;
                    pipe.cmds.push(cmd);
                }
                _ => return self.unexpected(&t, context),
            }
        }
    }

    /// `$x :=`, `$x =`, `$i, $e :=` at the start of a pipeline.
    fn declarations(&mut self, pipe: &mut Pipe, context: &str) -> Result<(), ParseError> {
        loop {
            let save = self.i;
            let v = self.peek_non_space();
            let Tok::Variable(name) = &v.tok else {
                self.i = save;
                return Ok(());
            };
            self.next();
            let after = self.peek_non_space();
            match after.tok {
                Tok::Declare | Tok::Assign => {
                    self.next();
                    pipe.is_assign = after.tok == Tok::Assign;
                    if pipe.is_assign && !self.vars.contains(name) {
                        return Err((v.pos, format!("undefined variable \"{name}\"")));
                    }
                    pipe.decl.push(name.clone());
                    self.vars.push(name.clone());
                    return Ok(());
                }
                Tok::Comma => {
                    self.next();
                    pipe.decl.push(name.clone());
                    self.vars.push(name.clone());
                    if context == "range" && pipe.decl.len() < 2 {
                        match self.peek_non_space().tok {
                            Tok::Variable(_) | Tok::RightDelim | Tok::RightParen => continue,
                            _ => return Err((v.pos, "range can only initialize variables".into())),
                        }
                    }
                    return Err((v.pos, format!("too many declarations in {context}")));
                }
                _ => {
                    self.i = save;
                    return Ok(());
                }
            }
        }
    }

    fn check_pipeline(&self, pipe: &Pipe, context: &str, pos: usize) -> Result<(), ParseError> {
        if pipe.cmds.is_empty() {
            return Err((pos, format!("missing value for {context}")));
        }
        for (i, c) in pipe.cmds.iter().enumerate().skip(1) {
            if let Some(a) = c.args.first() {
                if matches!(
                    a.kind,
                    ArgKind::Bool(_)
                        | ArgKind::Dot
                        | ArgKind::Nil
                        | ArgKind::Num(_)
                        | ArgKind::Str(_)
                ) {
                    return Err((
                        a.pos,
                        format!("non executable command in pipeline stage {}", i + 1),
                    ));
                }
            }
        }
        Ok(())
    }

    fn command(&mut self) -> Result<Cmd, ParseError> {
        let mut cmd = Cmd {
            pos: self.peek_non_space().pos,
            args: Vec::new(),
        };
        loop {
            self.skip_space();
            if let Some(a) = self.operand()? {
                cmd.args.push(a);
            }
            let t = self.next();
            match t.tok {
                Tok::Space => continue,
                Tok::RightDelim | Tok::RightParen => self.i -= 1,
                Tok::Pipe => {}
                _ => return self.unexpected(&t, "operand"),
            }
            break;
        }
        if cmd.args.is_empty() {
            return Err((cmd.pos, "empty command".into()));
        }
        Ok(cmd)
    }

    fn operand(&mut self) -> Result<Option<Arg>, ParseError> {
        let Some(term) = self.term()? else {
            return Ok(None);
        };
        let mut fields = Vec::new();
        while let Tok::Field(f) = &self.peek().tok {
            fields.push(f.clone());
            self.next();
        }
        if fields.is_empty() {
            return Ok(Some(term));
        }
        let kind = match term.kind {
            ArgKind::Field(mut f) => {
                f.extend(fields);
                ArgKind::Field(f)
            }
            ArgKind::Var(v, mut f) => {
                f.extend(fields);
                ArgKind::Var(v, f)
            }
            ArgKind::Bool(_) | ArgKind::Str(_) | ArgKind::Num(_) | ArgKind::Nil | ArgKind::Dot => {
                return Err((term.pos, "unexpected . after term".into()));
            }
            _ => ArgKind::Chain(Box::new(term.clone()), fields),
        };
        Ok(Some(Arg {
            pos: term.pos,
            kind,
        }))
    }

    fn term(&mut self) -> Result<Option<Arg>, ParseError> {
        let t = self.next_non_space();
        let pos = t.pos;
        let kind = match t.tok {
            Tok::Ident(name) => {
                if !(self.has_func)(&name) {
                    return Err((pos, format!("function \"{name}\" not defined")));
                }
                ArgKind::Ident(name)
            }
            Tok::Dot => ArgKind::Dot,
            Tok::Nil => ArgKind::Nil,
            Tok::Variable(name) => {
                if !self.vars.contains(&name) {
                    return Err((pos, format!("undefined variable \"{name}\"")));
                }
                ArgKind::Var(name, Vec::new())
            }
            Tok::Field(f) => ArgKind::Field(vec![f]),
            Tok::Bool(b) => ArgKind::Bool(b),
            Tok::Number(text) => ArgKind::Num(number(&text, false).map_err(|e| (pos, e))?),
            Tok::CharConst(text) => ArgKind::Num(number(&text, true).map_err(|e| (pos, e))?),
            Tok::LeftParen => {
                self.depth += 1;
                if self.depth > MAX_DEPTH {
                    return Err((pos, "template nested too deeply".into()));
                }
                let p = self.pipeline("parenthesized pipeline", Tok::RightParen);
                self.depth -= 1;
                ArgKind::Pipe(Box::new(p?))
            }
            Tok::Str(s) => ArgKind::Str(s),
            _ => {
                self.i -= 1;
                return Ok(None);
            }
        };
        Ok(Some(Arg { pos, kind }))
    }
}

/// What `text_or_action` found.
enum Item {
    Node(Node),
    End(usize),
    /// `{{else}}`, or `{{else if}}`/`{{else with}}` (keyword left unconsumed).
    Else(usize, Option<&'static str>),
}

/// Parses an integer with Go's base prefixes and underscores (`strconv.ParseInt(s, 0, 64)`).
fn parse_int(text: &str) -> Option<i128> {
    let (neg, body) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let lower = body.to_ascii_lowercase();
    let (radix, digits) = if let Some(r) = lower.strip_prefix("0x") {
        (16, r.to_string())
    } else if let Some(r) = lower.strip_prefix("0o") {
        (8, r.to_string())
    } else if let Some(r) = lower.strip_prefix("0b") {
        (2, r.to_string())
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, lower[1..].to_string())
    } else {
        (10, lower.clone())
    };
    if digits.starts_with('_') && radix == 10 || digits.ends_with('_') || digits.contains("__") {
        return None;
    }
    let digits = digits.trim_start_matches('_').replace('_', "");
    if digits.is_empty() {
        return None;
    }
    let v = i128::from_str_radix(&digits, radix).ok()?;
    Some(if neg { -v } else { v })
}

/// Go's `newNumber`: all the ways a literal can be read.
fn number(text: &str, is_char: bool) -> Result<Number, String> {
    let mut n = Number {
        text: text.to_string(),
        int: None,
        float: None,
        is_uint: false,
        is_char,
    };
    if text.ends_with('i') {
        return Err(format!("complex constants are not supported: {text:?}"));
    }
    if let Some(v) = parse_int(text) {
        if v >= 0 && v <= u64::MAX as i128 {
            n.is_uint = true;
        }
        if let Ok(i) = i64::try_from(v) {
            n.int = Some(i);
        }
        if n.int.is_some() || n.is_uint {
            n.float = Some(v as f64);
            return Ok(n);
        }
    }
    let plain = text.replace('_', "");
    match plain.parse::<f64>() {
        Ok(f) if f.is_finite() => {
            if !text.contains(['.', 'e', 'E', 'p', 'P']) {
                return Err(format!("integer overflow: {text:?}"));
            }
            n.float = Some(f);
            if f.fract() == 0.0 && f.abs() < 9.2e18 {
                n.int = Some(f as i64);
                n.is_uint = f >= 0.0;
            }
            Ok(n)
        }
        _ => Err(format!("illegal number syntax: {text:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Trees, ParseError> {
        parse("t", s, &|f| f == "printf")
    }

    #[test]
    fn parse_errors() {
        assert_eq!(
            p("{{ foo }}").err().map(|e| e.1),
            Some("function \"foo\" not defined".into())
        );
        assert_eq!(
            p("{{ $x }}").err().map(|e| e.1),
            Some("undefined variable \"$x\"".into())
        );
        assert!(p("{{ if .a }}").is_err());
        assert!(p("{{ break }}").is_err());
        assert!(p("{{ .a | 3 }}").is_err());
        assert!(p("{{ range $i, $e := .l }}{{ $i }}{{ break }}{{ end }}").is_ok());
    }

    #[test]
    fn numbers() {
        let n = number("0x1F", false).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(n.int, Some(31));
        let n = number("1e3", false).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((n.int, n.float), (Some(1000), Some(1000.0)));
        assert!(number("99999999999999999999", false).is_err());
    }
}
