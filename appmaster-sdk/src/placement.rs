//! YARN distributed shell's `--placement_spec`: a compact text form of allocation tags and
//! placement constraints, parsed into [`PlacementSpec`]s whose constraints are the wire's
//! [`PlacementConstraintInfo`] trees.
//!
//! ```text
//! Spec           := SourceTag=ConstraintExpr[:Spec]        (`;` also separates entries)
//! ConstraintExpr := NumContainers[,Constraint]
//! Constraint     := IN,Scope,Tag | NOTIN,Scope,Tag | CARDINALITY,Scope,Tag,Min,Max
//!                 | attr=value | attr!=value | AND(Constraint:Constraint...)
//!                 | OR(Constraint:Constraint...)
//! Scope          := NODE | RACK                            (any case)
//! ```
//!
//! YARN's example `zk=3,NOTIN,NODE,zk:hbase=5,IN,RACK,zk:spark=7,CARDINALITY,NODE,hbase,1,3`
//! asks for 3 `zk` containers never two on one node, 5 `hbase` containers on racks that hold
//! a `zk` container, and 7 `spark` containers on nodes holding 1 to 3 `hbase` containers.
//! Each entry's containers carry its source tag as their allocation tag. An attribute name
//! without a prefix means `rm.yarn.io/` (`os=ubuntu` is `rm.yarn.io/os=ubuntu`); a value may
//! list alternatives with `|` (`nm.yarn.io/gpu-model=H100|A100`). Spaces around the parts
//! are ignored. [`render`] writes the same text back.
//!
//! Errors name the entry, the offending part and its position (counted in bytes from 1).

use std::collections::BTreeSet;

use spindle_common::records::labels::{
    AttributeOp, ConstraintScope, PlacementConstraintInfo, RM_ATTRIBUTE_PREFIX,
};

/// One source tag's containers: how many and where.
#[derive(Debug, Clone, PartialEq)]
pub struct PlacementSpec {
    /// The entry's name; its containers are asked for with this allocation tag.
    pub source_tag: String,
    pub num_containers: u32,
    pub constraint: Option<PlacementConstraintInfo>,
}

/// A mistake in a placement spec. `pos` counts bytes from 1; `fragment` is the whole entry
/// (`SourceTag=...`) the mistake is in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementSpecError {
    #[error("the placement spec is empty; expected SourceTag=NumContainers[,Constraint][:...]")]
    Empty,
    #[error("empty entry at position {pos} in `{spec}`; entries are separated by one `:` or `;`")]
    EmptyEntry { spec: String, pos: usize },
    #[error(
        "unbalanced parenthesis at position {pos} in `{fragment}`; AND(...) and OR(...) must be \
         closed"
    )]
    Unbalanced { fragment: String, pos: usize },
    #[error("no `=` after the source tag in `{fragment}` (position {pos}); expected SourceTag=NumContainers[,Constraint]")]
    MissingEquals { fragment: String, pos: usize },
    #[error("empty source tag at position {pos} in `{fragment}`")]
    EmptySourceTag { fragment: String, pos: usize },
    #[error("source tag `{tag}` at position {pos} is given twice; one entry per source tag")]
    DuplicateSourceTag { tag: String, pos: usize },
    #[error(
        "invalid number of containers `{value}` at position {pos} in `{fragment}`; expected a \
         whole number of at least 1"
    )]
    BadNumContainers {
        value: String,
        fragment: String,
        pos: usize,
    },
    #[error("empty constraint at position {pos} in `{fragment}`")]
    EmptyConstraint { fragment: String, pos: usize },
    #[error(
        "unknown constraint `{token}` at position {pos} in `{fragment}`; expected IN, NOTIN, \
         CARDINALITY, attr=value, attr!=value, AND(...) or OR(...)"
    )]
    UnknownConstraint {
        token: String,
        fragment: String,
        pos: usize,
    },
    #[error("`{kind}` at position {pos} in `{fragment}` takes {expected}; {found} given")]
    WrongArgumentCount {
        kind: &'static str,
        expected: &'static str,
        found: usize,
        fragment: String,
        pos: usize,
    },
    #[error("unknown scope `{scope}` at position {pos} in `{fragment}`; expected NODE or RACK")]
    UnknownScope {
        scope: String,
        fragment: String,
        pos: usize,
    },
    #[error("empty tag at position {pos} in `{fragment}`")]
    EmptyTag { fragment: String, pos: usize },
    #[error(
        "invalid tag `{tag}` at position {pos} in `{fragment}`; a tag may not contain spaces, \
         `,`, `=`, `|`, `(` or `)`"
    )]
    InvalidTag {
        tag: String,
        fragment: String,
        pos: usize,
    },
    #[error(
        "invalid cardinality `{value}` at position {pos} in `{fragment}`; expected a whole \
         number"
    )]
    BadCardinality {
        value: String,
        fragment: String,
        pos: usize,
    },
    #[error(
        "minimum cardinality {min} is above the maximum {max} at position {pos} in `{fragment}`"
    )]
    MinAboveMax {
        min: u32,
        max: u32,
        fragment: String,
        pos: usize,
    },
    #[error("empty attribute name at position {pos} in `{fragment}`")]
    EmptyAttributeName { fragment: String, pos: usize },
    #[error("empty attribute value at position {pos} in `{fragment}`")]
    EmptyAttributeValue { fragment: String, pos: usize },
    #[error("`{kind}()` at position {pos} in `{fragment}` has no constraints; expected {kind}(c1:c2...)")]
    EmptyComposite {
        kind: &'static str,
        fragment: String,
        pos: usize,
    },
    #[error(
        "unexpected `{text}` at position {pos} after a complete {kind} constraint in `{fragment}`"
    )]
    Trailing {
        text: String,
        kind: &'static str,
        fragment: String,
        pos: usize,
    },
}

type E = PlacementSpecError;

/// A slice of the spec and where it starts (0-based byte offset in the whole spec).
#[derive(Debug, Clone, Copy)]
struct Piece<'a> {
    text: &'a str,
    off: usize,
}

impl<'a> Piece<'a> {
    fn trim(self) -> Self {
        let lead = self.text.len() - self.text.trim_start().len();
        Piece {
            text: self.text.trim(),
            off: self.off + lead,
        }
    }
    fn sub(self, from: usize, to: usize) -> Self {
        Piece {
            text: &self.text[from..to],
            off: self.off + from,
        }
    }
    /// 1-based position, for messages.
    fn pos(self) -> usize {
        self.off + 1
    }
}

/// Splits at the separators outside parentheses.
fn split_top<'a>(p: Piece<'a>, seps: &[char], fragment: &str) -> Result<Vec<Piece<'a>>, E> {
    let mut out = Vec::new();
    let mut depth: usize = 0;
    let mut opened = Vec::new();
    let mut start = 0;
    for (i, c) in p.text.char_indices() {
        match c {
            '(' => {
                depth += 1;
                opened.push(i);
            }
            ')' => {
                if depth == 0 {
                    return Err(E::Unbalanced {
                        fragment: fragment.to_string(),
                        pos: p.off + i + 1,
                    });
                }
                depth -= 1;
                opened.pop();
            }
            c if depth == 0 && seps.contains(&c) => {
                out.push(p.sub(start, i));
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    if let Some(&i) = opened.first() {
        return Err(E::Unbalanced {
            fragment: fragment.to_string(),
            pos: p.off + i + 1,
        });
    }
    out.push(p.sub(start, p.text.len()));
    Ok(out)
}

/// Parses a whole `--placement_spec`.
pub fn parse(spec: &str) -> Result<Vec<PlacementSpec>, PlacementSpecError> {
    if spec.trim().is_empty() {
        return Err(E::Empty);
    }
    let whole = Piece { text: spec, off: 0 };
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for entry in split_top(whole, &[':', ';'], spec)? {
        let entry = entry.trim();
        if entry.text.is_empty() {
            return Err(E::EmptyEntry {
                spec: spec.to_string(),
                pos: entry.pos(),
            });
        }
        let s = parse_entry(entry)?;
        if !seen.insert(s.source_tag.clone()) {
            return Err(E::DuplicateSourceTag {
                tag: s.source_tag,
                pos: entry.pos(),
            });
        }
        out.push(s);
    }
    Ok(out)
}

fn parse_entry(entry: Piece<'_>) -> Result<PlacementSpec, E> {
    let fragment = entry.text;
    let Some(eq) = entry.text.find('=') else {
        return Err(E::MissingEquals {
            fragment: fragment.to_string(),
            pos: entry.pos(),
        });
    };
    let tag = entry.sub(0, eq).trim();
    if tag.text.is_empty() {
        return Err(E::EmptySourceTag {
            fragment: fragment.to_string(),
            pos: entry.pos(),
        });
    }
    let source_tag = check_tag(tag, fragment)?;
    let rest = entry.sub(eq + 1, entry.text.len());
    let tokens = split_top(rest, &[','], fragment)?;
    let n = tokens[0].trim();
    let num_containers = match n.text.parse::<u32>() {
        Ok(v) if v >= 1 => v,
        _ => {
            return Err(E::BadNumContainers {
                value: n.text.to_string(),
                fragment: fragment.to_string(),
                pos: n.pos(),
            })
        }
    };
    let constraint = if tokens.len() > 1 {
        Some(parse_constraint(&tokens[1..], fragment)?)
    } else {
        None
    };
    Ok(PlacementSpec {
        source_tag,
        num_containers,
        constraint,
    })
}

fn check_tag(t: Piece<'_>, fragment: &str) -> Result<String, E> {
    let t = t.trim();
    if t.text.is_empty() {
        return Err(E::EmptyTag {
            fragment: fragment.to_string(),
            pos: t.pos(),
        });
    }
    if t.text
        .chars()
        .any(|c| c.is_whitespace() || matches!(c, ',' | '=' | '|' | '(' | ')' | ':' | ';'))
    {
        return Err(E::InvalidTag {
            tag: t.text.to_string(),
            fragment: fragment.to_string(),
            pos: t.pos(),
        });
    }
    Ok(t.text.to_string())
}

fn parse_scope(t: Piece<'_>, fragment: &str) -> Result<ConstraintScope, E> {
    let t = t.trim();
    match t.text.to_ascii_uppercase().as_str() {
        "NODE" => Ok(ConstraintScope::NODE),
        "RACK" => Ok(ConstraintScope::RACK),
        _ => Err(E::UnknownScope {
            scope: t.text.to_string(),
            fragment: fragment.to_string(),
            pos: t.pos(),
        }),
    }
}

fn parse_cardinality(t: Piece<'_>, fragment: &str) -> Result<u32, E> {
    let t = t.trim();
    t.text.parse().map_err(|_| E::BadCardinality {
        value: t.text.to_string(),
        fragment: fragment.to_string(),
        pos: t.pos(),
    })
}

/// One constraint given as its comma-separated tokens.
fn parse_constraint(tokens: &[Piece<'_>], fragment: &str) -> Result<PlacementConstraintInfo, E> {
    let first = tokens[0].trim();
    if first.text.is_empty() {
        return Err(E::EmptyConstraint {
            fragment: fragment.to_string(),
            pos: first.pos(),
        });
    }
    let upper = first.text.to_ascii_uppercase();
    let arity = |kind: &'static str, expected: &'static str, want: usize| {
        if tokens.len() == want {
            Ok(())
        } else {
            Err(E::WrongArgumentCount {
                kind,
                expected,
                found: tokens.len() - 1,
                fragment: fragment.to_string(),
                pos: first.pos(),
            })
        }
    };
    match upper.as_str() {
        "IN" | "NOTIN" => {
            let kind = if upper == "IN" { "IN" } else { "NOTIN" };
            arity(kind, "a scope and a tag (e.g. IN,NODE,zk)", 3)?;
            let scope = parse_scope(tokens[1], fragment)?;
            let tag = check_tag(tokens[2], fragment)?;
            return Ok(if kind == "IN" {
                PlacementConstraintInfo::IN { scope, tag }
            } else {
                PlacementConstraintInfo::NOTIN { scope, tag }
            });
        }
        "CARDINALITY" => {
            arity(
                "CARDINALITY",
                "a scope, a tag, a minimum and a maximum (e.g. CARDINALITY,NODE,hbase,1,3)",
                5,
            )?;
            let scope = parse_scope(tokens[1], fragment)?;
            let tag = check_tag(tokens[2], fragment)?;
            let min = parse_cardinality(tokens[3], fragment)?;
            let max = parse_cardinality(tokens[4], fragment)?;
            if min > max {
                return Err(E::MinAboveMax {
                    min,
                    max,
                    fragment: fragment.to_string(),
                    pos: tokens[3].trim().pos(),
                });
            }
            return Ok(PlacementConstraintInfo::CARDINALITY {
                scope,
                tag,
                min_cardinality: min,
                max_cardinality: max,
            });
        }
        _ => {}
    }
    let trailing = |kind: &'static str| {
        let t = tokens[1].trim();
        E::Trailing {
            text: t.text.to_string(),
            kind,
            fragment: fragment.to_string(),
            pos: t.pos(),
        }
    };
    for (kind, prefix) in [("AND", "AND("), ("OR", "OR(")] {
        if upper.starts_with(prefix) {
            if tokens.len() > 1 {
                return Err(trailing(kind));
            }
            return parse_composite(first, kind, prefix.len(), fragment);
        }
    }
    if first.text.contains('=') {
        if tokens.len() > 1 {
            return Err(trailing("attribute"));
        }
        return parse_attribute(first, fragment);
    }
    Err(E::UnknownConstraint {
        token: first.text.to_string(),
        fragment: fragment.to_string(),
        pos: first.pos(),
    })
}

/// `AND(c:c...)` / `OR(c:c...)`; `open` is the length of `AND(`. Parentheses are balanced
/// (checked when the entry was split).
fn parse_composite(
    p: Piece<'_>,
    kind: &'static str,
    open: usize,
    fragment: &str,
) -> Result<PlacementConstraintInfo, E> {
    // The parenthesis closing the one that opened.
    let mut depth = 0usize;
    let mut close = None;
    for (i, c) in p.text.char_indices().skip(open - 1) {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(i);
                    break;
                }
            }
            _ => {}
        }
    }
    let Some(close) = close else {
        return Err(E::Unbalanced {
            fragment: fragment.to_string(),
            pos: p.off + open,
        });
    };
    if close + 1 < p.text.len() {
        let t = p.sub(close + 1, p.text.len());
        return Err(E::Trailing {
            text: t.text.to_string(),
            kind,
            fragment: fragment.to_string(),
            pos: t.pos(),
        });
    }
    let inner = p.sub(open, close);
    if inner.text.trim().is_empty() {
        return Err(E::EmptyComposite {
            kind,
            fragment: fragment.to_string(),
            pos: p.pos(),
        });
    }
    let mut children = Vec::new();
    for child in split_top(inner, &[':'], fragment)? {
        let tokens = split_top(child, &[','], fragment)?;
        children.push(parse_constraint(&tokens, fragment)?);
    }
    Ok(if kind == "AND" {
        PlacementConstraintInfo::AND { children }
    } else {
        PlacementConstraintInfo::OR { children }
    })
}

/// `attr=v1|v2` or `attr!=v`.
fn parse_attribute(p: Piece<'_>, fragment: &str) -> Result<PlacementConstraintInfo, E> {
    let (op, at, len) = match p.text.find("!=") {
        Some(i) => (AttributeOp::NE, i, 2),
        None => (AttributeOp::EQ, p.text.find('=').unwrap_or(p.text.len()), 1),
    };
    let name = p.sub(0, at).trim();
    if name.text.is_empty() {
        return Err(E::EmptyAttributeName {
            fragment: fragment.to_string(),
            pos: p.pos(),
        });
    }
    let value = p.sub((at + len).min(p.text.len()), p.text.len());
    let mut values = Vec::new();
    let mut start = 0;
    for part in value.text.split('|') {
        let v = value.sub(start, start + part.len()).trim();
        start += part.len() + 1;
        if v.text.is_empty() {
            return Err(E::EmptyAttributeValue {
                fragment: fragment.to_string(),
                pos: v.pos(),
            });
        }
        values.push(v.text.to_string());
    }
    Ok(PlacementConstraintInfo::NODE_ATTRIBUTE {
        name: qualified_attribute(name.text),
        op,
        values,
    })
}

/// `os` -> `rm.yarn.io/os`; a name with a prefix is kept.
pub fn qualified_attribute(name: &str) -> String {
    if name.contains('/') {
        name.to_string()
    } else {
        format!("{RM_ATTRIBUTE_PREFIX}/{name}")
    }
}

fn scope_name(s: ConstraintScope) -> &'static str {
    match s {
        ConstraintScope::NODE => "NODE",
        ConstraintScope::RACK => "RACK",
    }
}

/// A constraint in the spec's text form (`NOTIN,NODE,zk`, `AND(a=b:IN,RACK,x)`).
pub fn render_constraint(c: &PlacementConstraintInfo) -> String {
    use PlacementConstraintInfo as C;
    match c {
        C::IN { scope, tag } => format!("IN,{},{tag}", scope_name(*scope)),
        C::NOTIN { scope, tag } => format!("NOTIN,{},{tag}", scope_name(*scope)),
        C::CARDINALITY {
            scope,
            tag,
            min_cardinality,
            max_cardinality,
        } => format!(
            "CARDINALITY,{},{tag},{min_cardinality},{max_cardinality}",
            scope_name(*scope)
        ),
        C::NODE_ATTRIBUTE { name, op, values } => {
            let op = match op {
                AttributeOp::EQ => "=",
                AttributeOp::NE => "!=",
            };
            format!("{name}{op}{}", values.join("|"))
        }
        C::AND { children } | C::OR { children } => {
            let kind = if matches!(c, C::AND { .. }) {
                "AND"
            } else {
                "OR"
            };
            let inner: Vec<String> = children.iter().map(render_constraint).collect();
            format!("{kind}({})", inner.join(":"))
        }
    }
}

/// The specs as one `--placement_spec` text (entries joined with `:`), which [`parse`]
/// reads back to the same specs.
pub fn render(specs: &[PlacementSpec]) -> String {
    specs
        .iter()
        .map(|s| match &s.constraint {
            Some(c) => format!(
                "{}={},{}",
                s.source_tag,
                s.num_containers,
                render_constraint(c)
            ),
            None => format!("{}={}", s.source_tag, s.num_containers),
        })
        .collect::<Vec<_>>()
        .join(":")
}

/// All containers the specs ask for.
pub fn total_containers(specs: &[PlacementSpec]) -> u32 {
    specs
        .iter()
        .fold(0u32, |n, s| n.saturating_add(s.num_containers))
}

#[cfg(test)]
mod tests {
    use super::*;
    use PlacementConstraintInfo as C;

    fn attr(name: &str, op: AttributeOp, values: &[&str]) -> C {
        C::NODE_ATTRIBUTE {
            name: name.into(),
            op,
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    #[test]
    fn yarns_example() {
        let s = "zk=3,NOTIN,NODE,zk:hbase=5,IN,RACK,zk:spark=7,CARDINALITY,NODE,hbase,1,3";
        let specs = parse(s).expect("YARN's example parses");
        assert_eq!(
            specs,
            vec![
                PlacementSpec {
                    source_tag: "zk".into(),
                    num_containers: 3,
                    constraint: Some(C::NOTIN {
                        scope: ConstraintScope::NODE,
                        tag: "zk".into()
                    }),
                },
                PlacementSpec {
                    source_tag: "hbase".into(),
                    num_containers: 5,
                    constraint: Some(C::IN {
                        scope: ConstraintScope::RACK,
                        tag: "zk".into()
                    }),
                },
                PlacementSpec {
                    source_tag: "spark".into(),
                    num_containers: 7,
                    constraint: Some(C::CARDINALITY {
                        scope: ConstraintScope::NODE,
                        tag: "hbase".into(),
                        min_cardinality: 1,
                        max_cardinality: 3
                    }),
                },
            ]
        );
        assert_eq!(render(&specs), s);
        assert_eq!(total_containers(&specs), 15);
        // `;` separates entries too; scopes and keywords in any case; spaces are ignored.
        let semi =
            parse("zk=3, notin, node, zk ; hbase=5,in,Rack,zk;spark=7,cardinality,NODE,hbase,1,3")
                .expect("parses");
        assert_eq!(semi, specs);
    }

    #[test]
    fn counts_alone_and_tag_namespaces() {
        assert_eq!(
            parse("worker=4").expect("parses"),
            vec![PlacementSpec {
                source_tag: "worker".into(),
                num_containers: 4,
                constraint: None
            }]
        );
        let s = parse("a=1,NOTIN,NODE,not-self/zk:b=2,IN,NODE,app-id/application_1_0001/zk")
            .expect("parses");
        assert_eq!(
            s[1].constraint,
            Some(C::IN {
                scope: ConstraintScope::NODE,
                tag: "app-id/application_1_0001/zk".into()
            })
        );
    }

    #[test]
    fn attributes() {
        let s = parse("py=2,python!=3:java=1,nm.yarn.io/gpu-model=H100|A100").expect("parses");
        assert_eq!(
            s[0].constraint,
            Some(attr("rm.yarn.io/python", AttributeOp::NE, &["3"]))
        );
        assert_eq!(
            s[1].constraint,
            Some(attr(
                "nm.yarn.io/gpu-model",
                AttributeOp::EQ,
                &["H100", "A100"]
            ))
        );
        assert_eq!(
            render(&s),
            "py=2,rm.yarn.io/python!=3:java=1,nm.yarn.io/gpu-model=H100|A100"
        );
        assert_eq!(qualified_attribute("os"), "rm.yarn.io/os");
    }

    #[test]
    fn and_or_nest() {
        let s = "ps=2,AND(NOTIN,NODE,ps:OR(os=ubuntu:IN,RACK,worker:AND(CARDINALITY,RACK,ps,0,1:gpu!=no)))";
        let specs = parse(s).expect("parses");
        assert_eq!(
            specs[0].constraint,
            Some(C::AND {
                children: vec![
                    C::NOTIN {
                        scope: ConstraintScope::NODE,
                        tag: "ps".into()
                    },
                    C::OR {
                        children: vec![
                            attr("rm.yarn.io/os", AttributeOp::EQ, &["ubuntu"]),
                            C::IN {
                                scope: ConstraintScope::RACK,
                                tag: "worker".into()
                            },
                            C::AND {
                                children: vec![
                                    C::CARDINALITY {
                                        scope: ConstraintScope::RACK,
                                        tag: "ps".into(),
                                        min_cardinality: 0,
                                        max_cardinality: 1
                                    },
                                    attr("rm.yarn.io/gpu", AttributeOp::NE, &["no"]),
                                ]
                            },
                        ]
                    },
                ]
            })
        );
        let again = parse(&render(&specs)).expect("its rendering parses");
        assert_eq!(again, specs);
        // An AND entry followed by another entry.
        let two = parse("a=1,and(IN,NODE,b:NOTIN,NODE,a):b=2").expect("parses");
        assert_eq!(two.len(), 2);
        assert_eq!(two[1].source_tag, "b");
    }

    fn err(s: &str) -> PlacementSpecError {
        parse(s).expect_err(s)
    }

    #[test]
    fn every_mistake_is_named() {
        assert_eq!(err("  "), E::Empty);
        let e = err("zk=3,NOTIN,NODES,zk");
        assert_eq!(
            e.to_string(),
            "unknown scope `NODES` at position 12 in `zk=3,NOTIN,NODES,zk`; expected NODE or RACK"
        );
        assert!(matches!(err("zk=3::hb=1"), E::EmptyEntry { pos: 6, .. }));
        assert!(matches!(err("zk=3;"), E::EmptyEntry { pos: 6, .. }));
        assert!(matches!(
            err("zk=3,AND(IN,NODE,zk"),
            E::Unbalanced { pos: 9, .. }
        ));
        assert!(matches!(
            err("zk=3,IN,NODE,zk)"),
            E::Unbalanced { pos: 16, .. }
        ));
        assert!(matches!(err("zk3"), E::MissingEquals { pos: 1, .. }));
        assert!(matches!(err("=3"), E::EmptySourceTag { .. }));
        assert!(matches!(err("a b=3"), E::InvalidTag { .. }));
        assert!(matches!(
            err("zk=1:zk=2"),
            E::DuplicateSourceTag { pos: 6, .. }
        ));
        for bad in ["zk=0", "zk=three", "zk=-1", "zk=", "zk=1.5"] {
            assert!(matches!(err(bad), E::BadNumContainers { .. }), "{bad}");
        }
        let e = err("zk=3,NOTIN,NODE");
        assert!(
            matches!(
                e,
                E::WrongArgumentCount {
                    kind: "NOTIN",
                    found: 1,
                    pos: 6,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(matches!(
            err("zk=3,IN,NODE,zk,extra"),
            E::WrongArgumentCount {
                kind: "IN",
                found: 3,
                ..
            }
        ));
        assert!(matches!(
            err("zk=3,CARDINALITY,NODE,zk,1"),
            E::WrongArgumentCount {
                kind: "CARDINALITY",
                ..
            }
        ));
        assert!(matches!(err("zk=3,"), E::EmptyConstraint { pos: 6, .. }));
        assert!(matches!(
            err("zk=3,AND(IN,NODE,a::IN,NODE,b)"),
            E::EmptyConstraint { .. }
        ));
        assert!(matches!(
            err("zk=3,NEAR,NODE,zk"),
            E::UnknownConstraint { pos: 6, .. }
        ));
        assert!(matches!(err("zk=3,IN,NODE, "), E::EmptyTag { .. }));
        assert!(matches!(err("zk=3,IN,NODE,a|b"), E::InvalidTag { .. }));
        assert!(matches!(
            err("zk=3,CARDINALITY,NODE,zk,one,3"),
            E::BadCardinality { .. }
        ));
        assert!(matches!(
            err("zk=3,CARDINALITY,NODE,zk,4,3"),
            E::MinAboveMax {
                min: 4,
                max: 3,
                pos: 26,
                ..
            }
        ));
        assert!(matches!(err("zk=3,=x"), E::EmptyAttributeName { .. }));
        assert!(matches!(err("zk=3,os!="), E::EmptyAttributeValue { .. }));
        assert!(matches!(err("zk=3,os=a||b"), E::EmptyAttributeValue { .. }));
        assert!(matches!(
            err("zk=3,AND()"),
            E::EmptyComposite { kind: "AND", .. }
        ));
        assert!(matches!(
            err("zk=3,OR(IN,NODE,a)x"),
            E::Trailing { kind: "OR", .. }
        ));
        assert!(matches!(
            err("zk=3,OR(IN,NODE,a),IN,NODE,b"),
            E::Trailing { kind: "OR", .. }
        ));
        assert!(matches!(
            err("zk=3,os=a,b"),
            E::Trailing {
                kind: "attribute",
                ..
            }
        ));
        // Mistakes inside a composite name the whole entry.
        let e = err("zk=3,AND(IN,NODE,a:NOTIN,SITE,b)");
        assert_eq!(
            e.to_string(),
            "unknown scope `SITE` at position 26 in `zk=3,AND(IN,NODE,a:NOTIN,SITE,b)`; expected NODE or RACK"
        );
    }

    mod props {
        use proptest::prelude::*;

        use super::super::*;

        fn tag() -> impl Strategy<Value = String> {
            "[a-z][a-z0-9_/-]{0,6}"
        }

        fn scope() -> impl Strategy<Value = ConstraintScope> {
            prop_oneof![Just(ConstraintScope::NODE), Just(ConstraintScope::RACK)]
        }

        fn constraint() -> impl Strategy<Value = PlacementConstraintInfo> {
            use PlacementConstraintInfo as C;
            let leaf = prop_oneof![
                (scope(), tag()).prop_map(|(scope, tag)| C::IN { scope, tag }),
                (scope(), tag()).prop_map(|(scope, tag)| C::NOTIN { scope, tag }),
                (scope(), tag(), 0u32..5, 0u32..5).prop_map(|(scope, tag, a, b)| {
                    C::CARDINALITY {
                        scope,
                        tag,
                        min_cardinality: a.min(b),
                        max_cardinality: a.max(b),
                    }
                }),
                (
                    "(rm|nm)\\.yarn\\.io/[a-z][a-z-]{0,5}",
                    prop::bool::ANY,
                    prop::collection::vec("[A-Za-z0-9.]{1,4}", 1..3)
                )
                    .prop_map(|(name, eq, values)| C::NODE_ATTRIBUTE {
                        name,
                        op: if eq { AttributeOp::EQ } else { AttributeOp::NE },
                        values,
                    }),
            ];
            leaf.prop_recursive(3, 12, 3, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 1..4)
                        .prop_map(|children| C::AND { children }),
                    prop::collection::vec(inner, 1..4).prop_map(|children| C::OR { children }),
                ]
            })
        }

        proptest! {
            #[test]
            fn render_then_parse_round_trips(
                entries in prop::collection::btree_map(
                    tag(), (1u32..50, prop::option::of(constraint())), 1..4)
            ) {
                let specs: Vec<PlacementSpec> = entries
                    .into_iter()
                    .map(|(source_tag, (num_containers, constraint))| PlacementSpec {
                        source_tag,
                        num_containers,
                        constraint,
                    })
                    .collect();
                let text = render(&specs);
                prop_assert_eq!(parse(&text).expect("a rendering parses"), specs);
            }
        }
    }
}
