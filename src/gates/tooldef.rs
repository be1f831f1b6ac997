//! Tool definitions, chat messages and expected calls as suite files write them, and the strict
//! check of a returned tool call: valid JSON, valid against the tool's JSON Schema (a real
//! validator: types, required, enums, nested objects, additionalProperties), then the expected
//! values.

use super::expect::{excerpt, ArgConstraint};
use super::suite::{item_label, join, type_name, Fields, Here, SuiteError};
use jsonschema::error::ValidationErrorKind;
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// One tool a request offers: OpenAI's `{"type":"function","function":{...}}`.
#[derive(Clone, Serialize)]
pub struct ToolDef {
    pub name: String,
    pub description: Option<String>,
    /// The JSON Schema of the arguments (checked against its meta-schema when loaded).
    pub parameters: Value,
    #[serde(skip)]
    validator: Arc<jsonschema::Validator>,
}

impl std::fmt::Debug for ToolDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolDef")
            .field("name", &self.name)
            .field("parameters", &self.parameters)
            .finish()
    }
}

pub const TOOL_FIELDS: &[&str] = &["name", "description", "parameters"];

impl ToolDef {
    /// The request's `tools[]` entry.
    pub fn to_openai(&self) -> Value {
        let mut f = Map::new();
        f.insert("name".into(), json!(self.name));
        if let Some(d) = &self.description {
            f.insert("description".into(), json!(d));
        }
        f.insert("parameters".into(), self.parameters.clone());
        json!({"type": "function", "function": f})
    }

    /// Builds a tool from its parts, checking the schema.
    pub fn new(
        name: &str,
        description: Option<&str>,
        parameters: Value,
        here: &Here,
        field: &str,
    ) -> Result<ToolDef, SuiteError> {
        super::schema_words::check(&parameters, here, field)?;
        if let Err(e) = jsonschema::meta::validate(&parameters) {
            let at = e.instance_path().as_str().to_string();
            let at = if at.is_empty() {
                String::new()
            } else {
                format!(" at {at}")
            };
            return Err(here.err(field, format!("not a valid JSON Schema{at}: {e}")));
        }
        if parameters.get("type").and_then(Value::as_str) != Some("object") {
            return Err(here.err(
                field,
                "the arguments schema must have type \"object\" (tool arguments are a JSON object)",
            ));
        }
        let validator = jsonschema::validator_for(&parameters)
            .map_err(|e| here.err(field, format!("the JSON Schema cannot be compiled: {e}")))?;
        Ok(ToolDef {
            name: name.to_string(),
            description: description.map(str::to_string),
            parameters,
            validator: Arc::new(validator),
        })
    }

    /// Schema violations of `args`, in words, in a stable order.
    pub fn schema_errors(&self, args: &Value) -> Vec<String> {
        let mut out: Vec<String> = self
            .validator
            .iter_errors(args)
            .map(|e| describe(&self.parameters, &e))
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// Reads a suite's `tools` array (names unique).
pub fn parse_tools(list: &[Value], file: &str) -> Result<Vec<ToolDef>, SuiteError> {
    let mut tools: Vec<ToolDef> = Vec::new();
    for (i, v) in list.iter().enumerate() {
        let here = Here::new(file, item_label("tool", "tools", i, v, "name"));
        let f = Fields::new(v, &here, "", TOOL_FIELDS)?;
        let name = f.str("name")?;
        if name.is_empty() {
            return Err(f.err("name", "must not be empty"));
        }
        if tools.iter().any(|t| t.name == name) {
            return Err(f.err("name", format!("duplicate tool name \"{name}\"")));
        }
        let params = f
            .get("parameters")
            .ok_or_else(|| f.err("parameters", "missing (the JSON Schema of the arguments)"))?;
        tools.push(ToolDef::new(
            name,
            f.opt_str("description")?,
            params.clone(),
            &here,
            "parameters",
        )?);
    }
    Ok(tools)
}

/// `a.b` paths of an instance location (`/address/zip` → `address.zip`).
fn dotted(pointer: &str) -> String {
    pointer
        .split('/')
        .skip(1)
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect::<Vec<_>>()
        .join(".")
}

fn type_words(t: &Value) -> String {
    match t {
        Value::String(s) => s.clone(),
        Value::Array(a) => a
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "the declared type".into(),
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// One validation error in words: `missing required string argument: zip`,
/// `argument days: expected integer, got string "5"`, `unexpected argument: foo`.
fn describe(schema: &Value, e: &jsonschema::ValidationError<'_>) -> String {
    let at = dotted(e.instance_path().as_str());
    let spath = e.schema_path().as_str().to_string();
    let keyword = schema.pointer(&spath);
    let value = e.instance();
    match e.kind() {
        ValidationErrorKind::Required { property } => {
            let prop = property
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| property.to_string());
            let parent = spath.strip_suffix("/required").unwrap_or("");
            let escaped = prop.replace('~', "~0").replace('/', "~1");
            let ty = schema
                .pointer(&format!("{parent}/properties/{escaped}/type"))
                .map(type_words);
            let full = join(&at, &prop);
            match ty {
                Some(t) => format!("missing required {t} argument: {full}"),
                None => format!("missing required argument: {full}"),
            }
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => unexpected
            .iter()
            .map(|u| {
                format!(
                    "unexpected argument: {} (the schema allows no other arguments)",
                    join(&at, u)
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
        ValidationErrorKind::Type { .. } => format!(
            "argument {}: expected {}, got {} {}",
            if at.is_empty() { "(root)".into() } else { at },
            keyword
                .map(type_words)
                .unwrap_or_else(|| "another type".into()),
            json_kind(value),
            excerpt(&value.to_string(), 60)
        ),
        ValidationErrorKind::Enum { options } => format!(
            "argument {at}: {} is not one of {}",
            excerpt(&value.to_string(), 60),
            options
        ),
        _ => format!(
            "argument {}: {e}",
            if at.is_empty() { "(root)".into() } else { at }
        ),
    }
}

/// One call a case expects: the tool's name and constraints on argument values by dotted path.
#[derive(Debug, Clone, Serialize)]
pub struct ExpectedCall {
    pub name: String,
    /// (dotted argument name, constraint), in the suite's order; serialized as a map.
    #[serde(serialize_with = "as_map")]
    pub arguments: Vec<(String, ArgConstraint)>,
}

fn as_map<S: serde::Serializer>(v: &[(String, ArgConstraint)], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(v.len()))?;
    for (k, c) in v {
        m.serialize_entry(k, c)?;
    }
    m.end()
}

pub const CALL_FIELDS: &[&str] = &["name", "arguments"];

impl ExpectedCall {
    pub fn parse(
        v: &Value,
        here: &Here,
        field: &str,
        tools: &[&ToolDef],
    ) -> Result<ExpectedCall, SuiteError> {
        let f = Fields::new(v, here, field, CALL_FIELDS)?;
        let name = f.str("name")?;
        let tool = tools.iter().find(|t| t.name == name).ok_or_else(|| {
            f.err(
                "name",
                format!(
                    "\"{name}\" is not one of the tools this item offers ({})",
                    tools
                        .iter()
                        .map(|t| t.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
        })?;
        let mut arguments = Vec::new();
        if let Some(args) = f.opt_table("arguments")? {
            for (path, c) in args {
                let fld = join(&f.field("arguments"), path);
                if let Err(m) = path_in_schema(&tool.parameters, path) {
                    return Err(here.err(fld, m));
                }
                arguments.push((path.clone(), ArgConstraint::parse(c, here, &fld)?));
            }
        }
        Ok(ExpectedCall {
            name: name.to_string(),
            arguments,
        })
    }
}

/// Checks a dotted path names properties the schema declares (where it declares any).
fn path_in_schema(schema: &Value, path: &str) -> Result<(), String> {
    let mut s = schema;
    for seg in path.split('.') {
        if seg.is_empty() {
            return Err(format!("\"{path}\" is not a valid dotted argument name"));
        }
        if s.get("type").and_then(Value::as_str) == Some("array") {
            if seg.parse::<usize>().is_err() {
                return Err(format!(
                    "\"{seg}\" in \"{path}\" indexes an array; use a number"
                ));
            }
            match s.get("items") {
                Some(i) => {
                    s = i;
                    continue;
                }
                None => return Ok(()),
            }
        }
        match s.get("properties").and_then(Value::as_object) {
            Some(props) => match props.get(seg) {
                Some(p) => s = p,
                None => {
                    return Err(format!(
                        "the tool's schema has no argument \"{seg}\" here (it declares: {})",
                        props.keys().cloned().collect::<Vec<_>>().join(", ")
                    ))
                }
            },
            None => return Ok(()),
        }
    }
    Ok(())
}

/// The value at a dotted path of an arguments object.
pub fn lookup<'a>(args: &'a Value, path: &str) -> Option<&'a Value> {
    let mut v = args;
    for seg in path.split('.') {
        v = match v {
            Value::Object(m) => m.get(seg)?,
            Value::Array(a) => a.get(seg.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(v)
}

/// A call as returned by the endpoint.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ReturnedCall {
    pub id: Option<String>,
    pub name: String,
    /// The arguments text as returned (a JSON object serialised when an engine sent an object).
    pub arguments: String,
}

/// Checks the returned calls against the expected ones, in order. Err is the reason in words.
pub fn check_calls(
    expected: &[ExpectedCall],
    offered: &[&ToolDef],
    got: &[ReturnedCall],
) -> Result<(), String> {
    if got.is_empty() {
        return Err("no tool call returned".into());
    }
    if got.len() != expected.len() {
        let names: Vec<&str> = got.iter().map(|c| c.name.as_str()).collect();
        return Err(format!(
            "returned {} tool calls ({}), expected {}",
            got.len(),
            names.join(", "),
            expected.len()
        ));
    }
    for (i, (exp, call)) in expected.iter().zip(got).enumerate() {
        let which = if expected.len() > 1 {
            format!("call {}: ", i + 1)
        } else {
            String::new()
        };
        check_one(exp, offered, call).map_err(|m| format!("{which}{m}"))?;
    }
    Ok(())
}

fn check_one(exp: &ExpectedCall, offered: &[&ToolDef], call: &ReturnedCall) -> Result<(), String> {
    let Some(tool) = offered.iter().find(|t| t.name == call.name) else {
        return Err(format!(
            "called an unknown tool \"{}\" (offered: {})",
            call.name,
            offered
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    };
    if call.name != exp.name {
        return Err(format!("called {}, expected {}", call.name, exp.name));
    }
    let args: Value = serde_json::from_str(&call.arguments).map_err(|_| {
        if call.arguments.trim().is_empty() {
            "arguments are not valid JSON: (empty)".to_string()
        } else {
            format!(
                "arguments are not valid JSON: {}",
                excerpt(&call.arguments, 80)
            )
        }
    })?;
    if !args.is_object() {
        return Err(format!(
            "arguments are not a JSON object: {} is {}",
            excerpt(&call.arguments, 80),
            type_name(&args)
        ));
    }
    let errors = tool.schema_errors(&args);
    if !errors.is_empty() {
        return Err(errors.join("; "));
    }
    for (path, c) in &exp.arguments {
        c.check(path, lookup(&args, path))?;
    }
    Ok(())
}

pub const MESSAGE_FIELDS: &[&str] = &["role", "content", "tool_calls", "tool_call_id", "name"];
const CALL_MESSAGE_FIELDS: &[&str] = &["id", "name", "arguments"];

/// Reads a list of chat messages as suites write them and returns OpenAI messages.
///
/// Suite form: `{ role, content }`; an assistant turn may carry
/// `tool_calls = [{ name, arguments = { .. } | "json text", id? }]` (ids default to
/// `call_<n>`); a `tool` turn's `tool_call_id` defaults to the oldest unanswered call.
pub fn parse_messages(
    list: &[Value],
    here: &Here,
    field: &str,
    id_base: &mut u64,
) -> Result<Vec<Value>, SuiteError> {
    let mut out = Vec::new();
    let mut pending: std::collections::VecDeque<String> = Default::default();
    for (i, v) in list.iter().enumerate() {
        let fld = format!("{field}[{i}]");
        let f = Fields::new(v, here, &fld, MESSAGE_FIELDS)?;
        let role = f.str("role")?;
        if !["system", "user", "assistant", "tool"].contains(&role) {
            return Err(f.err(
                "role",
                format!("\"{role}\" is not a chat role (system, user, assistant, tool)"),
            ));
        }
        let content = f.opt_str("content")?;
        let mut m = Map::new();
        m.insert("role".into(), json!(role));
        match f.opt_array("tool_calls")? {
            Some(calls) if role == "assistant" => {
                let mut oc = Vec::new();
                for (j, c) in calls.iter().enumerate() {
                    let cf = Fields::new(
                        c,
                        here,
                        &format!("{fld}.tool_calls[{j}]"),
                        CALL_MESSAGE_FIELDS,
                    )?;
                    let name = cf.str("name")?;
                    let args = match cf.get("arguments") {
                        None => "{}".to_string(),
                        Some(Value::String(s)) => s.clone(),
                        Some(v @ Value::Object(_)) => v.to_string(),
                        Some(v) => {
                            return Err(cf.err(
                                "arguments",
                                format!(
                                    "expected a table or a JSON string, found {}",
                                    type_name(v)
                                ),
                            ))
                        }
                    };
                    let id = match cf.opt_str("id")? {
                        Some(id) => id.to_string(),
                        None => {
                            *id_base += 1;
                            format!("call_{}", *id_base)
                        }
                    };
                    pending.push_back(id.clone());
                    oc.push(json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}));
                }
                m.insert("content".into(), content.map_or(Value::Null, |c| json!(c)));
                m.insert("tool_calls".into(), Value::Array(oc));
            }
            Some(_) => return Err(f.err("tool_calls", "only assistant messages carry tool_calls")),
            None => {
                let c = content.ok_or_else(|| {
                    f.err(
                        "content",
                        "missing (every message without tool_calls needs content)",
                    )
                })?;
                m.insert("content".into(), json!(c));
            }
        }
        if role == "tool" {
            let id = match f.opt_str("tool_call_id")? {
                Some(id) => {
                    pending.retain(|p| p != id);
                    id.to_string()
                }
                None => pending.pop_front().ok_or_else(|| {
                    f.err(
                        "tool_call_id",
                        "missing, and no earlier assistant tool call is waiting for a result",
                    )
                })?,
            };
            m.insert("tool_call_id".into(), json!(id));
            if let Some(n) = f.opt_str("name")? {
                m.insert("name".into(), json!(n));
            }
        } else if f.get("tool_call_id").is_some() {
            return Err(f.err("tool_call_id", "only tool messages carry tool_call_id"));
        } else if let Some(n) = f.opt_str("name")? {
            m.insert("name".into(), json!(n));
        }
        out.push(Value::Object(m));
    }
    Ok(out)
}

/// Reads `tool_choice`: "auto", "required", "none", or `{ name = "tool" }`.
pub fn parse_tool_choice(
    v: &Value,
    here: &Here,
    field: &str,
    tools: &[&ToolDef],
) -> Result<Value, SuiteError> {
    match v {
        Value::String(s) if ["auto", "required", "none"].contains(&s.as_str()) => Ok(v.clone()),
        Value::Object(_) => {
            let f = Fields::new(v, here, field, &["name"])?;
            let name = f.str("name")?;
            if !tools.iter().any(|t| t.name == name) {
                return Err(f.err(
                    "name",
                    format!("\"{name}\" is not one of the tools this item offers"),
                ));
            }
            Ok(json!({"type": "function", "function": {"name": name}}))
        }
        _ => Err(here.err(
            field,
            format!(
                "expected \"auto\", \"required\", \"none\" or {{ name = \"tool\" }}, found {v}"
            ),
        )),
    }
}

/// Picks the named tools (all when `names` is None).
pub fn select<'a>(
    all: &'a [ToolDef],
    names: Option<&[String]>,
    here: &Here,
    field: &str,
) -> Result<Vec<&'a ToolDef>, SuiteError> {
    match names {
        None => Ok(all.iter().collect()),
        Some(names) => names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                all.iter().find(|t| &t.name == n).ok_or_else(|| {
                    here.err(
                        format!("{field}[{i}]"),
                        format!("no tool named \"{n}\" in the suite's [[tools]]"),
                    )
                })
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forecast() -> ToolDef {
        let here = Here::new("f", "tool");
        ToolDef::new(
            "get_forecast",
            None,
            json!({"type":"object","properties":{
                "zip":{"type":"string"},
                "days":{"type":"integer"},
                "unit":{"type":"string","enum":["c","f"]},
                "where":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}
            },"required":["zip","days"],"additionalProperties":false}),
            &here,
            "parameters",
        )
        .unwrap()
    }

    fn call(args: &str) -> ReturnedCall {
        ReturnedCall {
            id: None,
            name: "get_forecast".into(),
            arguments: args.into(),
        }
    }

    #[test]
    fn reasons_in_words() {
        let t = forecast();
        let here = Here::new("f", "case");
        let exp = ExpectedCall::parse(
            &json!({"name": "get_forecast", "arguments": {"zip": "94103"}}),
            &here,
            "calls[0]",
            &[&t],
        )
        .unwrap();
        let check = |a: &str| check_calls(std::slice::from_ref(&exp), &[&t], &[call(a)]);
        assert!(check(r#"{"zip":"94103","days":3}"#).is_ok());
        assert_eq!(
            check(r#"{"days":3}"#).unwrap_err(),
            "missing required string argument: zip"
        );
        assert_eq!(
            check(r#"{"zip":"94103","days":3"#).unwrap_err(),
            "arguments are not valid JSON: {\"zip\":\"94103\",\"days\":3"
        );
        assert_eq!(
            check(r#"{"zip":"94103","days":"3"}"#).unwrap_err(),
            "argument days: expected integer, got string \"3\""
        );
        assert_eq!(
            check(r#"{"zip":"94103","days":3,"x":1}"#).unwrap_err(),
            "unexpected argument: x (the schema allows no other arguments)"
        );
        assert!(check(r#"{"zip":"94103","days":3,"unit":"k"}"#)
            .unwrap_err()
            .contains("\"k\" is not one of"));
        assert_eq!(
            check(r#"{"zip":"94103","days":3,"where":{}}"#).unwrap_err(),
            "missing required string argument: where.city"
        );
        assert_eq!(
            check(r#"{"zip":"10001","days":3}"#).unwrap_err(),
            "argument zip is \"10001\", expected \"94103\""
        );
        assert_eq!(
            check_calls(std::slice::from_ref(&exp), &[&t], &[]).unwrap_err(),
            "no tool call returned"
        );
    }

    #[test]
    fn refuses_a_schema_that_is_not_a_schema() {
        let here = Here::new("s.toml", "tool \"x\" (tools[0])");
        let e =
            ToolDef::new("x", None, json!({"type": "objekt"}), &here, "parameters").unwrap_err();
        assert_eq!(e.field, "parameters");
        assert!(e.message.contains("not a valid JSON Schema"), "{e}");
        let e = ExpectedCall::parse(
            &json!({"name": "get_forecast", "arguments": {"zipp": "1"}}),
            &here,
            "calls[0]",
            &[&forecast()],
        )
        .unwrap_err();
        assert_eq!(e.field, "calls[0].arguments.zipp");
    }

    #[test]
    fn messages_link_tool_results() {
        let here = Here::new("f", "case");
        let mut n = 0;
        let m = parse_messages(
            &[
                json!({"role":"user","content":"hi"}),
                json!({"role":"assistant","tool_calls":[{"name":"get_forecast","arguments":{"zip":"1"}}]}),
                json!({"role":"tool","content":"sunny"}),
            ],
            &here,
            "messages",
            &mut n,
        )
        .unwrap();
        assert_eq!(
            m[1]["tool_calls"][0]["function"]["arguments"],
            "{\"zip\":\"1\"}"
        );
        assert_eq!(m[2]["tool_call_id"], m[1]["tool_calls"][0]["id"]);
        assert!(m[1]["content"].is_null());
    }
}
