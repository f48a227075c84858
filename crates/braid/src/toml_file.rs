//! Typed TOML configuration files with one-line errors that name the key
//! (`key `iface[0].name`: …`), shared by the daemons' configurations.

use serde::de::DeserializeOwned;

/// Parses `text` into `T`; unknown keys are refused when `T` says `deny_unknown_fields`.
pub fn parse<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    let table: toml::Table = toml::from_str(text).map_err(|e| one_line(&e.to_string()))?;
    serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| {
        let path = e.path().to_string();
        let msg = one_line(&e.into_inner().to_string());
        if path.is_empty() || path == "." {
            msg
        } else {
            format!("key `{path}`: {msg}")
        }
    })
}

/// A multi-line message (TOML's, with a caret under the error) on one line.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
