//! What the barrage needs of the spec beyond `parse_spec`: each operation's query
//! parameters and request-body fields.

use std::collections::{BTreeMap, BTreeSet};

use super::super::{fill_with, parse_spec, read_spec, section, METHODS};

/// A JSON type, coarsely, as the spec's schemas give a property's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Str,
    Int,
    Num,
    Bool,
    Arr,
    Obj,
    /// oneOf/allOf/untyped: anything may be right.
    Any,
}

fn kind_of(t: &str) -> Kind {
    match t {
        "string" => Kind::Str,
        "integer" => Kind::Int,
        "number" => Kind::Num,
        "boolean" => Kind::Bool,
        "array" => Kind::Arr,
        "object" => Kind::Obj,
        _ => Kind::Any,
    }
}

/// One operation of a daemon in the spec, with what the barrage needs of it.
#[derive(Debug)]
pub struct Op {
    /// The path template (`/ws/v1/cluster/apps/{appid}`).
    pub path: String,
    /// Upper case.
    pub method: String,
    pub statuses: BTreeSet<u16>,
    /// Names of the query parameters it documents.
    pub query: Vec<String>,
    /// Its request body's top-level fields, if it documents a body.
    pub body: Option<Vec<(String, Kind)>>,
}

impl Op {
    /// The names of its path parameters, in order.
    pub fn params(&self) -> Vec<String> {
        let mut out = Vec::new();
        fill_with(&self.path, |p| {
            out.push(p.to_string());
            String::new()
        });
        out
    }
}

/// The index in `ops` of the operation `method` (upper case) `path`; panics if the spec has
/// none.
pub fn op_index(ops: &[Op], method: &str, path: &str) -> usize {
    ops.iter()
        .position(|o| o.method == method && o.path == path)
        .unwrap_or_else(|| panic!("{method} {path} in the spec"))
}

/// The operations of `daemon` in `docs/openapi.yaml` (see `read_ops`), for a test of the
/// crate at `crate_dir` (see `read_spec`).
pub fn spec_ops(crate_dir: &str, daemon: &str) -> Vec<Op> {
    read_ops(&read_spec(crate_dir), daemon)
}

/// A schema field as read: its kind, or the schema it refers to (resolved once all are read).
type SpecField = (String, Result<Kind, String>);

fn key_of(t: &str) -> &str {
    t.split(':')
        .next()
        .unwrap_or("")
        .trim()
        .trim_matches(|c| c == '\'' || c == '"')
}

fn ref_name(t: &str) -> Option<String> {
    let (_, r) = t.split_once("$ref:")?;
    Some(
        r.trim()
            .trim_matches(|c| c == '\'' || c == '"')
            .rsplit('/')
            .next()?
            .to_string(),
    )
}

/// The operations of `daemon` in the spec: `contract::parse_spec`'s paths, methods and
/// statuses, plus the query parameters and request-body fields read here (same layout
/// rules: parameters at 6-space indent, `- name:`/`- $ref:` items at 8, `in:` at 10;
/// schemas at 4 under `components: schemas:`, `properties:` at 6, fields at 8).
pub fn read_ops(text: &str, daemon: &str) -> Vec<Op> {
    let c = Components::read(text);
    let extra = path_extras(text, &c.params);
    let mut ops = Vec::new();
    for item in parse_spec(text)
        .into_iter()
        .filter(|i| i.daemons.contains(daemon))
    {
        for op in &item.ops {
            let (query, body) = extra
                .get(&(item.path.clone(), op.method.clone()))
                .cloned()
                .unwrap_or_default();
            ops.push(Op {
                path: item.path.clone(),
                method: op.method.to_uppercase(),
                statuses: op.statuses.clone(),
                query,
                body: body.map(|s| c.fields(&s)),
            });
        }
    }
    ops
}

/// The spec's `components:`: parameters (ref -> (name, in)), schemas (fields, own type).
#[derive(Default)]
struct Components {
    params: BTreeMap<String, (String, String)>,
    schemas: BTreeMap<String, Vec<SpecField>>,
    schema_type: BTreeMap<String, String>,
}

impl Components {
    fn read(text: &str) -> Self {
        let mut params: BTreeMap<String, (String, String)> = BTreeMap::new();
        let mut schemas: BTreeMap<String, Vec<SpecField>> = BTreeMap::new();
        let mut schema_type: BTreeMap<String, String> = BTreeMap::new();
        let mut sub = String::new();
        let mut cur = String::new();
        let mut in_props = false;
        let mut prop: Option<String> = None;
        for line in section(text, "components") {
            let t = line.text;
            match line.indent {
                2 => sub = key_of(t).to_string(),
                4 => {
                    cur = key_of(t).to_string();
                    in_props = false;
                    prop = None;
                }
                6 if sub == "parameters" => {
                    let v = t.split_once(':').map(|x| x.1.trim()).unwrap_or("");
                    let e = params.entry(cur.clone()).or_default();
                    match key_of(t) {
                        "name" => e.0 = v.to_string(),
                        "in" => e.1 = v.to_string(),
                        _ => {}
                    }
                }
                6 if sub == "schemas" => {
                    in_props = key_of(t) == "properties";
                    if key_of(t) == "type" {
                        let v = t.split_once(':').map(|x| x.1.trim()).unwrap_or("");
                        schema_type.insert(cur.clone(), v.to_string());
                    }
                }
                8 if sub == "schemas" && in_props => {
                    let name = key_of(t).to_string();
                    let rest = t.split_once(':').map(|x| x.1.trim()).unwrap_or("");
                    let kind = if let Some(inline) = rest.strip_prefix('{') {
                        let ty = inline
                            .split(',')
                            .find_map(|kv| kv.trim().strip_prefix("type:"))
                            .map(|v| v.trim().trim_end_matches('}').trim().to_string());
                        Ok(ty.map_or(Kind::Any, |v| kind_of(&v)))
                    } else {
                        Ok(Kind::Any)
                    };
                    schemas
                        .entry(cur.clone())
                        .or_default()
                        .push((name.clone(), kind));
                    prop = rest.is_empty().then_some(name);
                }
                10 if sub == "schemas" && in_props => {
                    // The first type-giving line of a multi-line property decides its kind.
                    if let Some(p) = prop.take() {
                        let k = if let Some(r) = ref_name(t) {
                            Err(r)
                        } else if let Some(v) = t.strip_prefix("type:") {
                            Ok(kind_of(v.trim()))
                        } else if t.starts_with("oneOf:") || t.starts_with("allOf:") {
                            Ok(Kind::Any)
                        } else {
                            prop = Some(p);
                            continue;
                        };
                        if let Some(f) = schemas
                            .get_mut(&cur)
                            .and_then(|f| f.iter_mut().find(|f| f.0 == p))
                        {
                            f.1 = k;
                        }
                    }
                }
                _ => {}
            }
        }
        Self {
            params,
            schemas,
            schema_type,
        }
    }

    /// The top-level fields of `schema`, each reference resolved to its schema's kind.
    fn fields(&self, schema: &str) -> Vec<(String, Kind)> {
        let resolve = |k: &Result<Kind, String>| match k {
            Ok(k) => *k,
            Err(r) => self.schema_type.get(r).map_or(Kind::Obj, |t| kind_of(t)),
        };
        self.schemas
            .get(schema)
            .map(|f| f.iter().map(|(n, k)| (n.clone(), resolve(k))).collect())
            .unwrap_or_default()
    }
}

/// Per (path, method) in the spec's `paths:`, the query parameters and the body schema.
fn path_extras(
    text: &str,
    params: &BTreeMap<String, (String, String)>,
) -> BTreeMap<(String, String), (Vec<String>, Option<String>)> {
    let mut extra: BTreeMap<(String, String), (Vec<String>, Option<String>)> = BTreeMap::new();
    let (mut path, mut method) = (String::new(), String::new());
    let (mut in_params, mut in_body) = (false, false);
    let mut pending: Option<String> = None;
    for line in section(text, "paths") {
        let t = line.text;
        match line.indent {
            2 => {
                path = key_of(t).to_string();
                method.clear();
            }
            4 => {
                let k = key_of(t);
                method = if METHODS.contains(&k) {
                    k.to_string()
                } else {
                    String::new()
                };
                in_params = false;
                in_body = false;
            }
            6 => {
                in_params = key_of(t) == "parameters";
                in_body = key_of(t) == "requestBody";
            }
            _ if method.is_empty() => {}
            8 if in_params => {
                let e = extra.entry((path.clone(), method.clone())).or_default();
                if let Some(n) = t.strip_prefix("- name:") {
                    pending = Some(n.trim().to_string());
                } else if let Some(r) = ref_name(t) {
                    pending = None;
                    if let Some((name, loc)) = params.get(&r) {
                        if loc == "query" {
                            e.0.push(name.clone());
                        }
                    }
                }
            }
            10 if in_params && t == "in: query" => {
                if let Some(n) = pending.take() {
                    extra
                        .entry((path.clone(), method.clone()))
                        .or_default()
                        .0
                        .push(n);
                }
            }
            _ if in_body => {
                if let Some(r) = ref_name(t) {
                    let e = extra.entry((path.clone(), method.clone())).or_default();
                    if e.1.is_none() {
                        e.1 = Some(r);
                    }
                }
            }
            _ => {}
        }
    }
    extra
}
