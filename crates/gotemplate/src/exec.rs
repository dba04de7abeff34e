//! The executor: walks a parsed tree against data, following Go's `text/template/exec.go`
//! rules for dot, variables, field chains, pipelines (the piped value is the last
//! argument), argument type checks, `range`/`with`/`if`, and template invocation.

use crate::fmt;
use crate::funcs::{self, FuncDef, P};
use crate::parse::{Arg, ArgKind, BranchKind, Cmd, Node, Number, Pipe, Trees};
use crate::value::{Elem, V};

/// How deep `{{template}}` may recurse (Go allows far more, but on a larger stack).
const MAX_TEMPLATE_DEPTH: usize = 500;

/// A `break`/`continue` travelling up to its `range`.
#[derive(PartialEq)]
enum Flow {
    Normal,
    Break,
    Continue,
}

/// An execution error with Go's `template: name:line:col: executing "name" at <node>:` prefix.
pub type ExecResult<T> = Result<T, String>;

pub struct State<'a> {
    trees: &'a Trees,
    text: &'a str,
    tmpl: String,
    vars: Vec<(String, V)>,
    out: String,
    depth: usize,
}

pub fn execute(trees: &Trees, text: &str, name: &str, data: V) -> ExecResult<String> {
    let Some(root) = trees.get(name) else {
        return Err(format!(
            "template: no template {name:?} associated with template {name:?}"
        ));
    };
    let mut s = State {
        trees,
        text,
        tmpl: name.to_string(),
        vars: vec![("$".into(), data.clone())],
        out: String::new(),
        depth: 0,
    };
    s.walk_list(&data, root)?;
    Ok(s.out)
}

impl State<'_> {
    /// Formats an error at `pos` the way Go does.
    fn err_at(&self, pos: usize, at: &str, msg: &str) -> String {
        let pos = pos.min(self.text.len());
        let before = self.text.get(..pos).unwrap_or("");
        let line = 1 + before.matches('\n').count();
        let col = pos - before.rfind('\n').map_or(0, |i| i + 1);
        format!(
            "template: {}:{}:{}: executing \"{}\" at <{}>: {}",
            self.tmpl, line, col, self.tmpl, at, msg
        )
    }

    fn walk_list(&mut self, dot: &V, list: &[Node]) -> ExecResult<Flow> {
        for n in list {
            let f = self.walk(dot, n)?;
            if f != Flow::Normal {
                return Ok(f);
            }
        }
        Ok(Flow::Normal)
    }

    fn walk(&mut self, dot: &V, node: &Node) -> ExecResult<Flow> {
        match node {
            Node::Text(t) => self.out.push_str(t),
            Node::Action(pipe) => {
                let v = self.eval_pipeline(dot, pipe)?;
                if pipe.decl.is_empty() {
                    self.print_value(&v);
                }
            }
            Node::Break => return Ok(Flow::Break),
            Node::Continue => return Ok(Flow::Continue),
            Node::Branch {
                kind: BranchKind::Range,
                pipe,
                list,
                else_list,
                ..
            } => {
                return self.walk_range(dot, pipe, list, else_list.as_deref());
            }
            Node::Branch {
                kind,
                pipe,
                list,
                else_list,
                ..
            } => {
                let mark = self.vars.len();
                let r = self.walk_if_or_with(dot, *kind, pipe, list, else_list.as_deref());
                self.vars.truncate(mark);
                return r;
            }
            Node::Template { pos, name, pipe } => {
                self.walk_template(dot, *pos, name, pipe.as_ref())?
            }
        }
        Ok(Flow::Normal)
    }

    fn print_value(&mut self, v: &V) {
        match v {
            V::Invalid => self.out.push_str("<no value>"),
            v => self.out.push_str(&fmt::to_string(v)),
        }
    }

    fn walk_if_or_with(
        &mut self,
        dot: &V,
        kind: BranchKind,
        pipe: &Pipe,
        list: &[Node],
        else_list: Option<&[Node]>,
    ) -> ExecResult<Flow> {
        let val = self.eval_pipeline(dot, pipe)?;
        if val.truth() {
            if kind == BranchKind::With {
                self.walk_list(&val, list)
            } else {
                self.walk_list(dot, list)
            }
        } else if let Some(e) = else_list {
            self.walk_list(dot, e)
        } else {
            Ok(Flow::Normal)
        }
    }

    fn walk_range(
        &mut self,
        dot: &V,
        pipe: &Pipe,
        list: &[Node],
        else_list: Option<&[Node]>,
    ) -> ExecResult<Flow> {
        let mark = self.vars.len();
        let r = self.walk_range_inner(dot, pipe, list, else_list);
        self.vars.truncate(mark);
        r
    }

    fn walk_range_inner(
        &mut self,
        dot: &V,
        pipe: &Pipe,
        list: &[Node],
        else_list: Option<&[Node]>,
    ) -> ExecResult<Flow> {
        let val = self.eval_pipeline(dot, pipe)?;
        let items: Vec<(V, V)> = match &val {
            V::List(l, _) => l
                .iter()
                .enumerate()
                .map(|(i, e)| (V::Int(i as i64), e.clone()))
                .collect(),
            V::Map(m, _) => m
                .borrow()
                .iter()
                .map(|(k, v)| (V::str(k.as_str()), v.clone()))
                .collect(),
            // Go 1.22 ranges over an integer n as 0..n.
            V::Int(n) | V::Int64(n) => (0..(*n).max(0)).map(|i| (V::Int(i), V::Int(i))).collect(),
            V::Invalid | V::Nil => Vec::new(),
            other => {
                return Err(self.err_at(
                    pipe.pos,
                    "range",
                    &format!("range can't iterate over {}", fmt::to_string(other)),
                ));
            }
        };
        if items.is_empty() {
            return match else_list {
                Some(e) => self.walk_list(dot, e),
                None => Ok(Flow::Normal),
            };
        }
        for (index, elem) in items {
            let mark = self.vars.len();
            self.set_range_vars(pipe, index, elem.clone());
            let f = self.walk_list(&elem, list);
            self.vars.truncate(mark);
            if f? == Flow::Break {
                break;
            }
        }
        Ok(Flow::Normal)
    }

    fn set_range_vars(&mut self, pipe: &Pipe, index: V, elem: V) {
        let n = self.vars.len();
        if pipe.is_assign {
            if pipe.decl.len() > 1 {
                self.set_var(&pipe.decl[0], index);
                self.set_var(&pipe.decl[1], elem);
            } else if let Some(d) = pipe.decl.first() {
                self.set_var(d, elem);
            }
            return;
        }
        if !pipe.decl.is_empty() && n >= 1 {
            self.vars[n - 1].1 = elem;
        }
        if pipe.decl.len() > 1 && n >= 2 {
            self.vars[n - 2].1 = index;
        }
    }

    fn set_var(&mut self, name: &str, v: V) {
        if let Some(slot) = self.vars.iter_mut().rev().find(|(n, _)| n == name) {
            slot.1 = v;
        }
    }

    fn walk_template(
        &mut self,
        dot: &V,
        pos: usize,
        name: &str,
        pipe: Option<&Pipe>,
    ) -> ExecResult<()> {
        let trees = self.trees;
        let Some(tree) = trees.get(name) else {
            return Err(self.err_at(
                pos,
                &format!("{{{{template {name:?}}}}}"),
                &format!("template {name:?} not defined"),
            ));
        };
        if self.depth >= MAX_TEMPLATE_DEPTH {
            return Err(self.err_at(
                pos,
                "template",
                &format!("exceeded maximum template depth ({MAX_TEMPLATE_DEPTH})"),
            ));
        }
        let new_dot = match pipe {
            Some(p) => self.eval_pipeline(dot, p)?,
            None => V::Invalid,
        };
        let saved_vars = std::mem::replace(&mut self.vars, vec![("$".into(), new_dot.clone())]);
        let saved_name = std::mem::replace(&mut self.tmpl, name.to_string());
        self.depth += 1;
        let r = self.walk_list(&new_dot, tree);
        self.depth -= 1;
        self.tmpl = saved_name;
        self.vars = saved_vars;
        r.map(|_| ())
    }

    pub fn eval_pipeline(&mut self, dot: &V, pipe: &Pipe) -> ExecResult<V> {
        let mut value: Option<V> = None;
        for cmd in &pipe.cmds {
            let v = self.eval_command(dot, cmd, value.take())?;
            // An interface{} holding nil is no value once it leaves its container.
            value = Some(if matches!(v, V::Nil) { V::Invalid } else { v });
        }
        let value = value.unwrap_or(V::Invalid);
        for name in &pipe.decl {
            if pipe.is_assign {
                self.set_var(name, value.clone());
            } else {
                self.vars.push((name.clone(), value.clone()));
            }
        }
        Ok(value)
    }

    fn not_a_function(&self, cmd: &Cmd, final_: &Option<V>) -> ExecResult<()> {
        if cmd.args.len() > 1 || final_.is_some() {
            let a = &cmd.args[0];
            return Err(self.err_at(
                a.pos,
                &arg_text(a),
                &format!("can't give argument to non-function {}", arg_text(a)),
            ));
        }
        Ok(())
    }

    fn eval_command(&mut self, dot: &V, cmd: &Cmd, final_: Option<V>) -> ExecResult<V> {
        let Some(first) = cmd.args.first() else {
            return Ok(V::Invalid);
        };
        match &first.kind {
            ArgKind::Field(f) => {
                return self.eval_field_chain(dot, dot.clone(), first, f, &cmd.args, final_)
            }
            ArgKind::Chain(base, fields) => {
                let b = self.eval_arg(dot, None, base)?;
                return self.eval_field_chain(dot, b, first, fields, &cmd.args, final_);
            }
            ArgKind::Ident(name) => return self.eval_function(dot, first, name, &cmd.args, final_),
            ArgKind::Pipe(p) => {
                self.not_a_function(cmd, &final_)?;
                return self.eval_pipeline(dot, p);
            }
            ArgKind::Var(name, fields) => {
                let v = self.var_value(name);
                if fields.is_empty() {
                    self.not_a_function(cmd, &final_)?;
                    return Ok(v);
                }
                return self.eval_field_chain(dot, v, first, fields, &cmd.args, final_);
            }
            _ => {}
        }
        self.not_a_function(cmd, &final_)?;
        match &first.kind {
            ArgKind::Bool(b) => Ok(V::Bool(*b)),
            ArgKind::Dot => Ok(dot.clone()),
            ArgKind::Nil => Err(self.err_at(first.pos, "nil", "nil is not a command")),
            ArgKind::Num(n) => self.ideal_constant(first.pos, n),
            ArgKind::Str(s) => Ok(V::str(s.as_str())),
            _ => Err(self.err_at(first.pos, &arg_text(first), "can't evaluate command")),
        }
    }

    fn var_value(&self, name: &str) -> V {
        self.vars
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map_or(V::Invalid, |(_, v)| v.clone())
    }

    /// An untyped number as `interface{}`: float64 if written as a float, else int.
    fn ideal_constant(&self, pos: usize, n: &Number) -> ExecResult<V> {
        let lower = n.text.to_ascii_lowercase();
        let hex_int =
            lower.trim_start_matches(['+', '-']).starts_with("0x") && !lower.contains('p');
        if let Some(f) = n.float {
            if !hex_int && !n.is_char && n.text.contains(['.', 'e', 'E', 'p', 'P']) {
                return Ok(V::Float(f));
            }
        }
        match n.int {
            Some(i) => Ok(V::Int(i)),
            None => Err(self.err_at(pos, &n.text, &format!("{} overflows int", n.text))),
        }
    }

    /// Walks `.a.b.c` from `receiver`; the last field gets the command's arguments.
    fn eval_field_chain(
        &mut self,
        _dot: &V,
        receiver: V,
        at: &Arg,
        fields: &[String],
        args: &[Arg],
        final_: Option<V>,
    ) -> ExecResult<V> {
        let mut r = receiver;
        let n = fields.len();
        for (i, f) in fields.iter().enumerate() {
            let has_args = i + 1 == n && (args.len() > 1 || final_.is_some());
            r = self.eval_field(at, f, r, has_args)?;
        }
        Ok(r)
    }

    fn eval_field(&self, at: &Arg, name: &str, receiver: V, has_args: bool) -> ExecResult<V> {
        let fail = |msg: String| Err(self.err_at(at.pos, &arg_text(at), &msg));
        match &receiver {
            V::Invalid => Ok(V::Invalid),
            V::Nil => fail(format!("nil pointer evaluating interface {{}}.{name}")),
            V::Map(m, _) => {
                if has_args {
                    return fail(format!("{name} is not a method but has arguments"));
                }
                Ok(m.borrow().get(name).cloned().unwrap_or(V::Invalid))
            }
            V::Semver(v) => {
                if has_args {
                    return fail(format!("wrong number of args for {name}: want 0 got 1"));
                }
                match crate::value::semver_method(v, name) {
                    Some(r) => Ok(r),
                    None => fail(format!(
                        "can't evaluate field {name} in type *semver.Version"
                    )),
                }
            }
            other => fail(format!(
                "can't evaluate field {name} in type {}",
                other.type_name()
            )),
        }
    }

    fn eval_function(
        &mut self,
        dot: &V,
        at: &Arg,
        name: &str,
        args: &[Arg],
        final_: Option<V>,
    ) -> ExecResult<V> {
        let Some(def) = funcs::lookup(name) else {
            return Err(self.err_at(at.pos, name, &format!("{name:?} is not a defined function")));
        };
        let rest = args.get(1..).unwrap_or(&[]);
        if name == "and" || name == "or" {
            return self.eval_and_or(dot, at, name == "or", rest, final_);
        }
        let argv = self.eval_args(dot, at, name, def, rest, final_)?;
        (def.f)(argv).map_err(|e| self.err_at(at.pos, name, &format!("error calling {name}: {e}")))
    }

    /// `and`/`or` stop at the first argument that decides the result, and return it.
    fn eval_and_or(
        &mut self,
        dot: &V,
        at: &Arg,
        is_or: bool,
        args: &[Arg],
        final_: Option<V>,
    ) -> ExecResult<V> {
        let n = args.len() + usize::from(final_.is_some());
        if n == 0 {
            let name = if is_or { "or" } else { "and" };
            return Err(self.err_at(
                at.pos,
                name,
                &format!("wrong number of args for {name}: want at least 1 got 0"),
            ));
        }
        let mut v = V::Invalid;
        for a in args {
            v = self.eval_arg(dot, Some(P::Val), a)?;
            if v.truth() == is_or {
                return Ok(v);
            }
        }
        if let Some(f) = final_ {
            v = f;
        }
        Ok(v)
    }

    fn eval_args(
        &mut self,
        dot: &V,
        at: &Arg,
        name: &str,
        def: &FuncDef,
        args: &[Arg],
        final_: Option<V>,
    ) -> ExecResult<Vec<V>> {
        let num_in = args.len() + usize::from(final_.is_some());
        let fixed = def.params.len();
        let ok = match def.variadic {
            Some(_) => num_in >= fixed,
            None => num_in == fixed,
        };
        if !ok {
            let want = if def.variadic.is_some() {
                format!("at least {fixed}")
            } else {
                fixed.to_string()
            };
            return Err(self.err_at(
                at.pos,
                name,
                &format!("wrong number of args for {name}: want {want} got {num_in}"),
            ));
        }
        let param = |i: usize| -> P {
            if i < fixed {
                def.params[i]
            } else {
                def.variadic.unwrap_or(P::Any)
            }
        };
        let mut argv = Vec::with_capacity(num_in);
        for (i, a) in args.iter().enumerate() {
            argv.push(self.eval_arg(dot, Some(param(i)), a)?);
        }
        if let Some(f) = final_ {
            let p = param(args.len());
            argv.push(self.validate(at, f, p)?);
        }
        Ok(argv)
    }

    /// Evaluates an operand for a parameter of kind `p` (None: untyped, as for chains).
    fn eval_arg(&mut self, dot: &V, p: Option<P>, a: &Arg) -> ExecResult<V> {
        let v = match &a.kind {
            ArgKind::Dot => dot.clone(),
            ArgKind::Field(f) => {
                self.eval_field_chain(dot, dot.clone(), a, f, std::slice::from_ref(a), None)?
            }
            ArgKind::Var(name, fields) => {
                let v = self.var_value(name);
                if fields.is_empty() {
                    v
                } else {
                    self.eval_field_chain(dot, v, a, fields, std::slice::from_ref(a), None)?
                }
            }
            ArgKind::Pipe(pipe) => self.eval_pipeline(dot, pipe)?,
            ArgKind::Ident(name) => {
                self.eval_function(dot, a, name, std::slice::from_ref(a), None)?
            }
            ArgKind::Chain(base, fields) => {
                let b = self.eval_arg(dot, None, base)?;
                self.eval_field_chain(dot, b, a, fields, std::slice::from_ref(a), None)?
            }
            _ => return self.eval_literal(p, a),
        };
        match p {
            None => Ok(if matches!(v, V::Nil) { V::Invalid } else { v }),
            Some(p) => self.validate(a, v, p),
        }
    }

    fn eval_literal(&self, p: Option<P>, a: &Arg) -> ExecResult<V> {
        let p = p.unwrap_or(P::Any);
        let mismatch = |want: &str| {
            Err(self.err_at(
                a.pos,
                &arg_text(a),
                &format!("expected {want}; found {}", arg_text(a)),
            ))
        };
        match (&a.kind, p) {
            (ArgKind::Nil, P::Any | P::Map) => Ok(V::Nil),
            (ArgKind::Nil, P::Val) => Ok(V::Invalid),
            (ArgKind::Nil, _) => Err(self.err_at(
                a.pos,
                "nil",
                &format!("cannot assign nil to {}", p.go_name()),
            )),
            (ArgKind::Bool(b), P::Bool | P::Any | P::Val) => Ok(V::Bool(*b)),
            (ArgKind::Bool(_), _) => mismatch(p.go_name()),
            (ArgKind::Str(s), P::Str | P::Any | P::Val) => Ok(V::str(s.as_str())),
            (ArgKind::Str(_), _) => mismatch(p.go_name()),
            (ArgKind::Num(n), P::Int) => match n.int {
                Some(i) if n.float.is_none_or(|f| f == i as f64) => Ok(V::Int(i)),
                _ => mismatch("integer"),
            },
            (ArgKind::Num(n), P::Float) => match n.float {
                Some(f) => Ok(V::Float(f)),
                None => mismatch("float"),
            },
            (ArgKind::Num(n), P::Any | P::Val) => self.ideal_constant(a.pos, n),
            (ArgKind::Num(_), _) => mismatch(p.go_name()),
            (ArgKind::Dot, _) => Ok(V::Invalid),
            _ => Err(self.err_at(
                a.pos,
                &arg_text(a),
                &format!(
                    "can't handle {} for arg of type {}",
                    arg_text(a),
                    p.go_name()
                ),
            )),
        }
    }

    /// Go's `validateType`: may a computed value be passed as a parameter of kind `p`?
    fn validate(&self, a: &Arg, v: V, p: P) -> ExecResult<V> {
        let fail = |msg: String| Err(self.err_at(a.pos, &arg_text(a), &msg));
        match (&v, p) {
            (_, P::Val) => Ok(v),
            (V::Invalid, P::Any) => Ok(V::Nil),
            (V::Invalid, P::Map) => Ok(V::Nil),
            (V::Invalid, _) => fail(format!("invalid value; expected {}", p.go_name())),
            (_, P::Any) => Ok(v),
            (V::Bool(_), P::Bool)
            | (V::Int(_), P::Int)
            | (V::Float(_), P::Float)
            | (V::Str(_), P::Str)
            | (V::Map(_, Elem::Any), P::Map) => Ok(v),
            (V::Nil, _) => fail(format!(
                "wrong type for value; expected {}; got interface {{}}",
                p.go_name()
            )),
            _ => fail(format!(
                "wrong type for value; expected {}; got {}",
                p.go_name(),
                v.type_name()
            )),
        }
    }
}

/// A short rendering of an operand for error messages (Go prints the node).
fn arg_text(a: &Arg) -> String {
    match &a.kind {
        ArgKind::Dot => ".".into(),
        ArgKind::Nil => "nil".into(),
        ArgKind::Bool(b) => b.to_string(),
        ArgKind::Num(n) => n.text.clone(),
        ArgKind::Str(s) => fmt::quote(s),
        ArgKind::Field(f) => f.iter().map(|x| format!(".{x}")).collect(),
        ArgKind::Var(v, f) => format!(
            "{v}{}",
            f.iter().map(|x| format!(".{x}")).collect::<String>()
        ),
        ArgKind::Ident(i) => i.clone(),
        ArgKind::Pipe(_) => "(...)".into(),
        ArgKind::Chain(b, f) => format!(
            "{}{}",
            arg_text(b),
            f.iter().map(|x| format!(".{x}")).collect::<String>()
        ),
    }
}
