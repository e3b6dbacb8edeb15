//! Just enough JSON: a writer for objects and a reader for the flat one-line
//! objects that workers print (string and number values).

use std::collections::BTreeMap;
use std::fmt::Write;

/// Builds one JSON object; values are written as given (`raw`) or escaped.
#[derive(Default)]
pub struct Obj {
    buf: String,
}

impl Obj {
    pub fn new() -> Obj {
        Obj::default()
    }

    fn key(&mut self, k: &str) {
        self.buf.push(if self.buf.is_empty() { '{' } else { ',' });
        quote_into(&mut self.buf, k);
        self.buf.push(':');
    }

    pub fn str(mut self, k: &str, v: &str) -> Obj {
        self.key(k);
        quote_into(&mut self.buf, v);
        self
    }

    pub fn num(mut self, k: &str, v: u64) -> Obj {
        self.key(k);
        let _ = write!(self.buf, "{v}");
        self
    }

    /// A float, or `null` when it is not finite.
    pub fn float(mut self, k: &str, v: f64) -> Obj {
        self.key(k);
        if v.is_finite() {
            let _ = write!(self.buf, "{v}");
        } else {
            self.buf.push_str("null");
        }
        self
    }

    pub fn opt_float(self, k: &str, v: Option<f64>) -> Obj {
        match v {
            Some(v) => self.float(k, v),
            None => self.raw(k, "null"),
        }
    }

    pub fn bool(self, k: &str, v: bool) -> Obj {
        self.raw(k, if v { "true" } else { "false" })
    }

    /// An already-encoded JSON value (an object or array built elsewhere).
    pub fn raw(mut self, k: &str, json: &str) -> Obj {
        self.key(k);
        self.buf.push_str(json);
        self
    }

    pub fn finish(mut self) -> String {
        if self.buf.is_empty() {
            self.buf.push('{');
        }
        self.buf.push('}');
        self.buf
    }
}

/// `[a,b,c]` of already-encoded values.
pub fn array<I: IntoIterator<Item = String>>(items: I) -> String {
    let items: Vec<String> = items.into_iter().collect();
    format!("[{}]", items.join(","))
}

fn quote_into(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A value of a flat object.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Str(String),
    Num(f64),
    Bool(bool),
    Null,
}

/// Parses a flat JSON object (no nested objects or arrays).
pub fn parse_flat(s: &str) -> Result<BTreeMap<String, Value>, String> {
    let mut p = Parser {
        s: s.as_bytes(),
        i: 0,
    };
    let mut map = BTreeMap::new();
    p.expect(b'{')?;
    if p.peek() == Some(b'}') {
        return Ok(map);
    }
    loop {
        let k = p.string()?;
        p.expect(b':')?;
        let v = p.value()?;
        map.insert(k, v);
        match p.next() {
            Some(b',') => continue,
            Some(b'}') => return Ok(map),
            _ => return Err(format!("expected , or }} at {}", p.i)),
        }
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.s.get(self.i).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    fn expect(&mut self, c: u8) -> Result<(), String> {
        match self.next() {
            Some(x) if x == c => Ok(()),
            _ => Err(format!("expected {:?} at {}", c as char, self.i)),
        }
    }

    fn string(&mut self) -> Result<String, String> {
        self.expect(b'"')?;
        let mut out = Vec::new();
        while let Some(&c) = self.s.get(self.i) {
            self.i += 1;
            match c {
                b'"' => return String::from_utf8(out).map_err(|e| e.to_string()),
                b'\\' => {
                    let e = *self.s.get(self.i).ok_or("bad escape")?;
                    self.i += 1;
                    match e {
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let hex = self.s.get(self.i..self.i + 4).ok_or("bad \\u")?;
                            let hex = std::str::from_utf8(hex).map_err(|e| e.to_string())?;
                            let cp = u32::from_str_radix(hex, 16).map_err(|e| e.to_string())?;
                            self.i += 4;
                            let ch = char::from_u32(cp).unwrap_or('\u{fffd}');
                            out.extend_from_slice(ch.to_string().as_bytes());
                        }
                        other => out.push(other),
                    }
                }
                c => out.push(c),
            }
        }
        Err("unterminated string".into())
    }

    fn value(&mut self) -> Result<Value, String> {
        match self.peek() {
            Some(b'"') => Ok(Value::Str(self.string()?)),
            Some(_) => {
                let start = self.i;
                while self.i < self.s.len() && !b",} \t\r\n".contains(&self.s[self.i]) {
                    self.i += 1;
                }
                let tok = std::str::from_utf8(&self.s[start..self.i]).map_err(|e| e.to_string())?;
                match tok {
                    "true" => Ok(Value::Bool(true)),
                    "false" => Ok(Value::Bool(false)),
                    "null" => Ok(Value::Null),
                    t => t
                        .parse()
                        .map(Value::Num)
                        .map_err(|_| format!("bad value {t:?}")),
                }
            }
            None => Err("unexpected end".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let line = Obj::new()
            .str("impl", "go \"x\"\n")
            .num("elapsed_ns", 123)
            .float("r", 0.5)
            .bool("ok", true)
            .finish();
        let m = parse_flat(&line).unwrap();
        assert_eq!(m["impl"], Value::Str("go \"x\"\n".into()));
        assert_eq!(m["elapsed_ns"], Value::Num(123.0));
        assert_eq!(m["r"], Value::Num(0.5));
        assert_eq!(m["ok"], Value::Bool(true));
        assert!(parse_flat("{}").unwrap().is_empty());
        assert!(parse_flat("{\"a\":}").is_err());
    }
}
