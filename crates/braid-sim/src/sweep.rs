//! Sweeps given on the command line or from Python: `--sweep key=a,b,c` becomes an override of
//! the scenario's `[sweep]` table (`sweep."key" = [a, b, c]`), which the loader expands into
//! one variant per point, exactly as a `[sweep]` written in the file.
//!
//! A value is a TOML literal when it parses as one (`0.3`, `true`, `"a,b"`, `[1, 2]`), else a
//! string (`rej1`, `10ms`, `50Mbit`), as `--set` reads values.

use std::str::FromStr;

/// `key=a,b,c` → the key and its values. Commas inside quotes or brackets do not split.
pub fn parse(spec: &str) -> Result<(String, Vec<toml::Value>), String> {
    let (key, list) = spec.split_once('=').ok_or_else(|| {
        format!("--sweep `{spec}`: expected key=a,b,c, e.g. connection.reinjection=stock,rej1")
    })?;
    let key = key.trim();
    check_key(key)?;
    let mut values = Vec::new();
    let (mut depth, mut quote, mut start) = (0i32, None::<char>, 0);
    for (i, c) in list.char_indices() {
        match (c, quote) {
            ('"' | '\'', None) => quote = Some(c),
            (c, Some(q)) if c == q => quote = None,
            (_, Some(_)) => {}
            ('[' | '{', None) => depth += 1,
            (']' | '}', None) => depth -= 1,
            (',', None) if depth == 0 => {
                values.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    values.push(&list[start..]);
    let values: Vec<toml::Value> = values
        .into_iter()
        .map(str::trim)
        .map(|raw| {
            if raw.is_empty() {
                Err(format!("--sweep `{spec}`: an empty value"))
            } else {
                Ok(literal(raw))
            }
        })
        .collect::<Result<_, _>>()?;
    Ok((key.to_string(), values))
}

/// A value as `--set` reads it: a TOML literal, else the text as a string.
pub fn literal(raw: &str) -> toml::Value {
    toml::Value::from_str(raw).unwrap_or_else(|_| toml::Value::String(raw.to_string()))
}

/// The `--set` override that sweeps `key` over `values` (for [`crate::scenario::load`]).
pub fn set_sweep(key: &str, values: &[toml::Value]) -> Result<String, String> {
    check_key(key)?;
    if values.is_empty() {
        return Err(format!("sweep of `{key}`: no values"));
    }
    Ok(format!(
        "sweep.\"{key}\"={}",
        toml::Value::Array(values.to_vec())
    ))
}

/// The `--set` override that sets `key` to `value`.
pub fn set(key: &str, value: &toml::Value) -> String {
    format!("{key}={value}")
}

/// Every `--sweep` turned into an override, refused when `--set` fixes the same key (the
/// loader would silently drop the sweep) or when a key is swept twice.
pub fn overrides(sweeps: &[String], sets: &[String]) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    for s in sweeps {
        let (key, values) = parse(s)?;
        if keys.contains(&key) {
            return Err(format!("--sweep `{key}` given twice"));
        }
        if sets
            .iter()
            .any(|o| o.split_once('=').is_some_and(|(k, _)| k.trim() == key))
        {
            return Err(format!(
                "`{key}` is both swept (--sweep) and set (--set): give one"
            ));
        }
        out.push(set_sweep(&key, &values)?);
        keys.push(key);
    }
    Ok(out)
}

fn check_key(key: &str) -> Result<(), String> {
    if key.is_empty() || key.contains('"') || key.split('.').any(str::is_empty) {
        return Err(format!(
            "sweep key `{key}`: expected a dotted scenario key, e.g. link.0.rate"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_split_and_typed() {
        let (k, v) = parse("connection.reinjection=stock, rej1,rej2").unwrap();
        assert_eq!(k, "connection.reinjection");
        assert_eq!(
            v,
            ["stock", "rej1", "rej2"].map(|s| toml::Value::String(s.into()))
        );
        let (_, v) = parse("link.1.alpha=1.0,0.3,1").unwrap();
        assert_eq!(
            v,
            [
                toml::Value::Float(1.0),
                toml::Value::Float(0.3),
                toml::Value::Integer(1)
            ]
        );
        let (_, v) = parse(r#"k="a,b",[1, 2],true"#).unwrap();
        assert_eq!(v.len(), 3);
        assert_eq!(v[0], toml::Value::String("a,b".into()));
        assert!(matches!(v[1], toml::Value::Array(_)));
        assert_eq!(v[2], toml::Value::Boolean(true));
    }

    #[test]
    fn bad_specs_are_one_line_errors() {
        for bad in ["noequals", "=a,b", "k=a,,b", "k.=a", "\"k\"=a"] {
            let e = parse(bad).unwrap_err();
            assert!(!e.contains('\n'), "{e}");
        }
        let e = overrides(
            &["link.0.rate=1Mbit,2Mbit".into()],
            &["link.0.rate=3Mbit".into()],
        )
        .unwrap_err();
        assert!(e.contains("both swept"), "{e}");
        let e = overrides(&["a.b=1,2".into(), "a.b=3".into()], &[]).unwrap_err();
        assert!(e.contains("twice"), "{e}");
    }

    #[test]
    fn sweep_expands_into_variants() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scenarios/e3-rtt-below-rtomin.toml"
        ))
        .unwrap();
        let sets = overrides(
            &[
                "connection.reinjection=stock,rej1,rej2".into(),
                "link.wlan.delay=10ms,20ms".into(),
            ],
            &[],
        )
        .unwrap();
        let plan =
            crate::scenario::load_str(&text, "e3", std::path::Path::new("."), &sets).unwrap();
        let names: Vec<&str> = plan.variants.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "reinjection=stock-delay=10ms",
                "reinjection=stock-delay=20ms",
                "reinjection=rej1-delay=10ms",
                "reinjection=rej1-delay=20ms",
                "reinjection=rej2-delay=10ms",
                "reinjection=rej2-delay=20ms",
            ]
        );
        assert_eq!(
            plan.variants[3].scenario.links[0].delay.0,
            std::time::Duration::from_millis(20)
        );
    }
}
