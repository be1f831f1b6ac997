//! A strict reading of a tool's JSON Schema: every key of every schema object must be a JSON
//! Schema keyword (a typo such as `additionalPropertiesx` would otherwise be ignored by any
//! validator and silently weaken the gate), `enum` must list at least one value, and `required`
//! may only name declared properties.

use super::suite::{Here, SuiteError};
use serde_json::Value;

/// The keywords of JSON Schema drafts 7 and 2020-12, with their annotations.
pub const KEYWORDS: &[&str] = &[
    "$schema",
    "$id",
    "$ref",
    "$anchor",
    "$dynamicRef",
    "$dynamicAnchor",
    "$recursiveRef",
    "$recursiveAnchor",
    "$vocabulary",
    "$comment",
    "$defs",
    "definitions",
    "type",
    "enum",
    "const",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxContains",
    "minContains",
    "maxProperties",
    "minProperties",
    "required",
    "dependentRequired",
    "dependencies",
    "properties",
    "patternProperties",
    "additionalProperties",
    "propertyNames",
    "items",
    "prefixItems",
    "additionalItems",
    "contains",
    "unevaluatedItems",
    "unevaluatedProperties",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "format",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
];

/// Keywords whose value is a map of names to schemas.
const SCHEMA_MAPS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];
/// Keywords whose value is one schema.
const SCHEMA_ONE: &[&str] = &[
    "additionalProperties",
    "additionalItems",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contentSchema",
];
/// Keywords whose value is an array of schemas (`items`: a schema or, in draft 7, an array).
const SCHEMA_LISTS: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems", "items"];

/// Checks `schema` (at suite field `field`) and every schema inside it.
pub fn check(schema: &Value, here: &Here, field: &str) -> Result<(), SuiteError> {
    let Value::Object(m) = schema else {
        return Ok(()); // booleans are schemas; other types are the meta-schema's to refuse
    };
    for (k, v) in m {
        let at = format!("{field}.{k}");
        if !KEYWORDS.contains(&k.as_str()) {
            return Err(here
                .err(at, format!("`{k}` is not a JSON Schema keyword (a validator would ignore it)"))
                .fix("check its spelling (e.g. additionalProperties, required, enum), or move it where it belongs: a [[cases]] or [[items]] header may be missing above it"));
        }
        if k == "enum" && v.as_array().is_some_and(Vec::is_empty) {
            return Err(here
                .err(at, "an empty enum: no value could ever be valid")
                .fix("list the allowed values, e.g. enum = [\"celsius\", \"fahrenheit\"], or remove enum"));
        }
        if SCHEMA_MAPS.contains(&k.as_str()) {
            if let Value::Object(props) = v {
                for (name, sub) in props {
                    check(sub, here, &format!("{at}.{name}"))?;
                }
            }
        } else if SCHEMA_ONE.contains(&k.as_str()) {
            check(v, here, &at)?;
        } else if SCHEMA_LISTS.contains(&k.as_str()) {
            match v {
                Value::Array(a) => {
                    for (i, sub) in a.iter().enumerate() {
                        check(sub, here, &format!("{at}[{i}]"))?;
                    }
                }
                other => check(other, here, &at)?,
            }
        } else if k == "dependencies" {
            if let Value::Object(deps) = v {
                for (name, sub) in deps {
                    check(sub, here, &format!("{at}.{name}"))?;
                }
            }
        }
    }
    if let (Some(Value::Array(req)), Some(Value::Object(props))) =
        (m.get("required"), m.get("properties"))
    {
        let no_extra = m.get("patternProperties").is_none()
            && m.get("additionalProperties") == Some(&Value::Bool(false));
        for (i, r) in req.iter().enumerate() {
            if let Some(name) = r.as_str() {
                if no_extra && !props.contains_key(name) {
                    return Err(here
                        .err(
                            format!("{field}.required[{i}]"),
                            format!("`{name}` is required but not among the properties, and additionalProperties is false: no call could be valid"),
                        )
                        .fix("declare the property under properties, or fix the name in required"));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(v: Value) -> String {
        check(
            &v,
            &Here::new("s.toml", "tool \"t\" (tools[0])"),
            "parameters",
        )
        .unwrap_err()
        .to_string()
    }

    #[test]
    fn typos_and_empty_enums_are_refused() {
        let ok = json!({"type":"object","properties":{"u":{"type":"string","enum":["c"]},
            "w":{"type":"object","additionalProperties":false,"properties":{"c":{"type":"string"}},"required":["c"]}},
            "required":["u"],"additionalProperties":false,"allOf":[{"title":"x"}]});
        check(&ok, &Here::new("s.toml", "t"), "parameters").unwrap();
        let e = err(json!({"type":"object","additionalPropertiesx":false}));
        assert!(
            e.contains("field `parameters.additionalPropertiesx`"),
            "{e}"
        );
        assert!(e.contains("; check its spelling"), "{e}");
        let e = err(json!({"type":"object","properties":{"u":{"type":"string","enum":[]}}}));
        assert!(
            e.contains("`parameters.properties.u.enum`: an empty enum"),
            "{e}"
        );
        let e = err(
            json!({"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"string","prompt":"x"}}}}}),
        );
        assert!(
            e.contains("`parameters.properties.a.properties.b.prompt`"),
            "{e}"
        );
        let e = err(
            json!({"type":"object","properties":{"a":{}},"required":["b"],"additionalProperties":false}),
        );
        assert!(e.contains("`parameters.required[0]`"), "{e}");
    }
}
