//! Tool calls: which tool to call and its arguments, built from the JSON schema and the user message.

use serde_json::{Map, Value};

use super::profile::ToolBehavior;

/// Words skipped between a property name and its value in the `<prop> <value>` form.
const STOP_WORDS: &[&str] = &[
    "is", "of", "to", "the", "a", "an", "in", "for", "be", "as", "at", "on", "should", "must",
];

fn tool_name(tool: &Value) -> Option<&str> {
    tool.get("function")
        .and_then(|f| f.get("name"))
        .or_else(|| tool.get("name"))
        .and_then(Value::as_str)
}

/// The tool to call: the one named by `tool_choice`, else the first whose name appears in the
/// user message, else the first. None when tool_choice is "none" or no tool has a name.
pub fn choose<'a>(
    tools: &'a [Value],
    tool_choice: Option<&Value>,
    user: &str,
) -> Option<&'a Value> {
    match tool_choice {
        Some(Value::String(s)) if s == "none" => return None,
        Some(Value::Object(o)) => {
            let want = o
                .get("function")
                .and_then(|f| f.get("name"))
                .or_else(|| o.get("name"))
                .and_then(Value::as_str);
            if let Some(want) = want {
                if let Some(t) = tools.iter().find(|t| tool_name(t) == Some(want)) {
                    return Some(t);
                }
            }
        }
        _ => {}
    }
    let named: Vec<&Value> = tools.iter().filter(|t| tool_name(t).is_some()).collect();
    named
        .iter()
        .find(|t| user.contains(tool_name(t).unwrap_or("")))
        .or_else(|| named.first())
        .copied()
}

/// The name and arguments (JSON text) of a call to `tool`, shaped by `behavior`.
pub fn call(tool: &Value, user: &str, behavior: ToolBehavior) -> (String, String) {
    let name = tool_name(tool).unwrap_or("tool").to_string();
    let params = tool
        .get("function")
        .and_then(|f| f.get("parameters"))
        .or_else(|| tool.get("parameters"))
        .cloned()
        .unwrap_or(Value::Null);
    let drop = if behavior == ToolBehavior::DropRequiredArg {
        params
            .get("required")
            .and_then(Value::as_array)
            .and_then(|r| r.first())
            .and_then(Value::as_str)
            .map(str::to_string)
    } else {
        None
    };
    let args = object_for(&params, user, drop.as_deref());
    let mut text = serde_json::to_string(&args).unwrap_or_else(|_| "{}".into());
    if behavior == ToolBehavior::MalformedArguments {
        // Cut the closing brace and the character before it: never valid JSON.
        text.pop();
        if text.len() > 1 {
            text.pop();
        }
    }
    (name, text)
}

/// An object with a value for every property of `schema` (except `skip`).
pub fn object_for(schema: &Value, user: &str, skip: Option<&str>) -> Value {
    let mut out = Map::new();
    if let Some(Value::Object(props)) = schema.get("properties") {
        for (k, s) in props {
            if Some(k.as_str()) == skip {
                continue;
            }
            out.insert(k.clone(), value_for(k, s, user));
        }
    }
    Value::Object(out)
}

/// An object with a value for each of `keys` (properties looked up in `schema` when present).
pub fn object_with_keys(schema: &Value, keys: &[String], user: &str) -> Value {
    let mut out = Map::new();
    for k in keys {
        let s = schema
            .get("properties")
            .and_then(|p| p.get(k))
            .cloned()
            .unwrap_or(Value::Null);
        out.insert(k.clone(), value_for(k, &s, user));
    }
    Value::Object(out)
}

/// One property's value: from the user message, else `enum[0]`, else `default`, else
/// `examples[0]`, else a typed placeholder.
pub fn value_for(prop: &str, schema: &Value, user: &str) -> Value {
    if let Some(v) = find_in_text(user, prop).and_then(|raw| coerce(&raw, schema)) {
        return v;
    }
    if let Some(v) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return v.clone();
    }
    if let Some(v) = schema.get("default") {
        return v.clone();
    }
    if let Some(v) = schema
        .get("examples")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return v.clone();
    }
    placeholder(prop, schema)
}

fn schema_type(schema: &Value) -> &str {
    match schema.get("type") {
        Some(Value::String(s)) => s,
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("string"),
        _ => "string",
    }
}

fn placeholder(prop: &str, schema: &Value) -> Value {
    match schema_type(schema) {
        "integer" => Value::from(1),
        "number" => Value::from(1.5),
        "boolean" => Value::Bool(true),
        "array" => Value::Array(Vec::new()),
        "object" => object_for(schema, "", None),
        "null" => Value::Null,
        _ => Value::String(format!("example {prop}")),
    }
}

/// Convert a raw value found in text to the schema's type (None when it does not fit).
fn coerce(raw: &str, schema: &Value) -> Option<Value> {
    if let Some(Value::Array(e)) = schema.get("enum") {
        return e
            .iter()
            .find(|v| match v {
                Value::String(s) => s.eq_ignore_ascii_case(raw),
                other => serde_json::from_str::<Value>(raw).ok().as_ref() == Some(other),
            })
            .cloned();
    }
    match schema_type(schema) {
        "integer" => raw.parse::<i64>().ok().map(Value::from),
        "number" => raw
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .map(Value::from),
        "boolean" => match raw.to_ascii_lowercase().as_str() {
            "true" | "yes" => Some(Value::Bool(true)),
            "false" | "no" => Some(Value::Bool(false)),
            _ => None,
        },
        "array" => Some(Value::Array(vec![Value::String(raw.to_string())])),
        "object" | "null" => None,
        _ => Some(Value::String(raw.to_string())),
    }
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The value written after `prop` in `text` as `prop: v`, `prop=v` or `prop v` (v a quoted
/// string, a number or a word). The first occurrence with a value wins.
pub fn find_in_text(text: &str, prop: &str) -> Option<String> {
    if prop.is_empty() {
        return None;
    }
    let tb = text.as_bytes();
    let lower = text.to_ascii_lowercase();
    let needle = prop.to_ascii_lowercase();
    let mut from = 0;
    while let Some(pos) = lower[from..].find(&needle) {
        let start = from + pos;
        let end = start + needle.len();
        from = start + 1;
        if start > 0 && is_word_byte(tb[start - 1]) {
            continue;
        }
        if end < tb.len() && is_word_byte(tb[end]) {
            continue;
        }
        if let Some(v) = value_after(&text[end..]) {
            return Some(v);
        }
    }
    None
}

fn value_after(rest: &str) -> Option<String> {
    let trimmed = rest.trim_start_matches([' ', '\t']);
    let spaced = trimmed.len() < rest.len();
    let (mut s, loose) = if let Some(r) = trimmed.strip_prefix([':', '=']) {
        (r.trim_start_matches([' ', '\t']), false)
    } else if spaced {
        (trimmed, true)
    } else {
        return None;
    };
    for _ in 0..3 {
        let first = s.chars().next()?;
        if first == '"' || first == '\'' {
            let body = &s[1..];
            let close = body.find(first)?;
            return Some(body[..close].to_string());
        }
        let end = s
            .find(|c: char| c.is_whitespace() || ",;?!()[]{}\"'".contains(c))
            .unwrap_or(s.len());
        let mut word = &s[..end];
        while word.ends_with(['.', ':']) {
            word = &word[..word.len() - 1];
        }
        if word.is_empty() {
            return None;
        }
        if loose && STOP_WORDS.contains(&word.to_ascii_lowercase().as_str()) {
            s = s[end..].trim_start_matches([' ', '\t']);
            continue;
        }
        return Some(word.to_string());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn weather() -> Value {
        json!({"type":"function","function":{"name":"get_weather","parameters":{
            "type":"object",
            "properties":{
                "city":{"type":"string"},
                "unit":{"type":"string","enum":["celsius","fahrenheit"]},
                "days":{"type":"integer","default":3},
                "detailed":{"type":"boolean"}
            },
            "required":["city","unit"]}}})
    }

    #[test]
    fn finds_values_in_the_three_forms() {
        assert_eq!(
            find_in_text("city: Paris, please", "city").as_deref(),
            Some("Paris")
        );
        assert_eq!(
            find_in_text("use unit=fahrenheit.", "unit").as_deref(),
            Some("fahrenheit")
        );
        assert_eq!(
            find_in_text("for city Lyon today", "city").as_deref(),
            Some("Lyon")
        );
        assert_eq!(
            find_in_text("the city is \"New York\"", "city").as_deref(),
            Some("New York")
        );
        assert_eq!(find_in_text("days 5.", "days").as_deref(), Some("5"));
        assert_eq!(find_in_text("velocity: 3", "city"), None);
        assert_eq!(find_in_text("no value here", "city"), None);
    }

    #[test]
    fn builds_arguments_per_behavior() {
        let t = weather();
        let user = "What is the weather? city: Paris, unit: Fahrenheit, days 5";
        let (name, args) = call(&t, user, ToolBehavior::Correct);
        assert_eq!(name, "get_weather");
        let v: Value = serde_json::from_str(&args).unwrap();
        assert_eq!(
            v,
            json!({"city":"Paris","unit":"fahrenheit","days":5,"detailed":true})
        );

        let (_, args) = call(&t, "weather please", ToolBehavior::Correct);
        let v: Value = serde_json::from_str(&args).unwrap();
        assert_eq!(v["unit"], "celsius");
        assert_eq!(v["days"], 3);
        assert_eq!(v["city"], "example city");

        let (_, args) = call(&t, user, ToolBehavior::DropRequiredArg);
        let v: Value = serde_json::from_str(&args).unwrap();
        assert!(v.get("city").is_none() && v.get("unit").is_some());

        let (_, args) = call(&t, user, ToolBehavior::MalformedArguments);
        assert!(serde_json::from_str::<Value>(&args).is_err(), "{args}");
    }

    #[test]
    fn chooses_named_tool() {
        let tools = vec![
            json!({"type":"function","function":{"name":"a_tool"}}),
            json!({"type":"function","function":{"name":"b_tool"}}),
        ];
        assert_eq!(
            tool_name(choose(&tools, None, "use b_tool").unwrap()),
            Some("b_tool")
        );
        assert_eq!(
            tool_name(choose(&tools, None, "anything").unwrap()),
            Some("a_tool")
        );
        assert!(choose(&tools, Some(&json!("none")), "b_tool").is_none());
        let forced = json!({"type":"function","function":{"name":"b_tool"}});
        assert_eq!(
            tool_name(choose(&tools, Some(&forced), "a_tool").unwrap()),
            Some("b_tool")
        );
    }
}
