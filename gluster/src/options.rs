//! Volume options: `volume set`, `volume reset` and `volume get`.

use serde::Deserialize;

use crate::xml::parse;
use crate::GlusterError;

/// One option as `gluster volume get` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionValue {
    /// The option's full name, for example `performance.cache-size`.
    pub name: String,
    /// The effective value; `None` where gluster prints `(null)`, meaning it has none.
    pub value: Option<String>,
    /// Gluster marks values nobody has set with `(DEFAULT)`; the mark is not in `value`.
    pub is_default: bool,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GetBody {
    vol_getopts: GetOptsXml,
}

#[derive(Debug, Deserialize)]
struct GetOptsXml {
    #[serde(default, rename = "Opt")]
    opt: Vec<OptXml>,
}

#[derive(Debug, Deserialize)]
struct OptXml {
    #[serde(rename = "Option")]
    option: String,
    #[serde(default, rename = "Value")]
    value: String,
}

const DEFAULT_MARK: &str = " (DEFAULT)";

/// Parses `gluster --xml volume get NAME KEY|all`.
pub fn parse_volume_get(xml: &str) -> Result<Vec<OptionValue>, GlusterError> {
    let body: GetBody = parse("volume get", xml)?;
    Ok(body
        .vol_getopts
        .opt
        .into_iter()
        .map(|o| {
            let raw = o.value.trim();
            let (raw, is_default) = match raw.strip_suffix(DEFAULT_MARK) {
                Some(v) => (v, true),
                None => (raw, raw == DEFAULT_MARK.trim()),
            };
            let value = match raw {
                "(null)" | "(DEFAULT)" => None,
                v => Some(v.to_string()),
            };
            OptionValue {
                name: o.option,
                value,
                is_default,
            }
        })
        .collect())
}

/// Option names are lowercase dotted words such as `performance.cache-size`: at least two
/// words of `a-z`, `0-9`, `-` and `_` (gluster has `storage.linux-io_uring`).
pub fn validate_option_key(key: &str) -> Result<(), GlusterError> {
    let words_ok = key.split('.').all(|w| {
        !w.is_empty()
            && !w.starts_with('-')
            && w.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
    });
    if key.len() <= 128 && key.contains('.') && words_ok {
        Ok(())
    } else {
        Err(GlusterError::invalid(
            "option key",
            format!("{key:?} must be lowercase dotted words, for example performance.cache-size"),
        ))
    }
}

/// A boolean option value as gluster reads it (`on`/`off`, `yes`/`no`, `true`/`false`,
/// `enable`/`disable`, `1`/`0`, any case); None for anything else.
pub fn parse_bool(value: &str) -> Option<bool> {
    match value.to_ascii_lowercase().as_str() {
        "on" | "yes" | "true" | "enable" | "1" => Some(true),
        "off" | "no" | "false" | "disable" | "0" => Some(false),
        _ => None,
    }
}

/// Values go to gluster as one argument: not empty, one line, no control characters, and not
/// starting with `--`, which the CLI would take for one of its own flags.
pub fn validate_option_value(value: &str) -> Result<(), GlusterError> {
    let reason = if value.trim().is_empty() {
        "must not be empty"
    } else if value.chars().any(char::is_control) {
        "must be one line without control characters"
    } else if value.starts_with("--") {
        "must not start with \"--\", which gluster reads as a flag"
    } else if value.len() > 4096 {
        "is longer than 4096 bytes"
    } else {
        return Ok(());
    };
    Err(GlusterError::invalid(
        "option value",
        format!("{value:?} {reason}"),
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn booleans_read_as_gluster_reads_them() {
        for v in ["on", "YES", "true", "Enable", "1"] {
            assert_eq!(super::parse_bool(v), Some(true), "{v}");
        }
        for v in ["off", "No", "FALSE", "disable", "0"] {
            assert_eq!(super::parse_bool(v), Some(false), "{v}");
        }
        assert_eq!(super::parse_bool("maybe"), None);
    }

    use super::*;

    #[test]
    fn get_set_value() {
        let opts = parse_volume_get(include_str!("../testdata/volume-get.xml")).unwrap();
        assert_eq!(
            opts,
            [OptionValue {
                name: "performance.cache-size".into(),
                value: Some("64MB".into()),
                is_default: false,
            }]
        );
    }

    #[test]
    fn get_default_value_drops_the_mark() {
        let opts = parse_volume_get(include_str!("../testdata/volume-get-default.xml")).unwrap();
        assert_eq!(opts.len(), 1);
        assert_eq!(opts[0].value.as_deref(), Some("32MB"));
        assert!(opts[0].is_default);
    }

    #[test]
    fn null_is_none() {
        let xml = include_str!("../testdata/volume-get.xml")
            .replace("performance.cache-size", "cluster.quorum-count")
            .replace("64MB", "(null) (DEFAULT)");
        let opts = parse_volume_get(&xml).unwrap();
        assert_eq!(opts[0].value, None);
        assert!(opts[0].is_default);
    }

    #[test]
    fn get_unknown_key_keeps_gluster_text() {
        let err = parse_volume_get(include_str!("../testdata/volume-get-unknown.xml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("Did you mean nfs.acl or ...disable?"), "{err}");
    }

    #[test]
    fn keys_and_values() {
        for ok in [
            "performance.cache-size",
            "features.soft-timeout",
            "storage.linux-io_uring",
            "performance.nfs.io-cache",
            "user.x1",
        ] {
            validate_option_key(ok).unwrap();
        }
        for bad in [
            "",
            "performance",
            "Performance.cache-size",
            "performance..x",
            ".x",
            "x.",
            "a.-b",
            "a.b c",
            "a.b;c",
            "--xml.x",
        ] {
            let err = validate_option_key(bad).unwrap_err();
            assert!(
                matches!(
                    err,
                    GlusterError::Invalid {
                        field: "option key",
                        ..
                    }
                ),
                "{bad:?}"
            );
        }
        for ok in ["64MB", "0", "-1", "10.0.0.*,10.1.0.1", "a b"] {
            validate_option_value(ok).unwrap();
        }
        for bad in ["", " ", "a\nb", "a\rb", "\0", "--mode=x"] {
            assert!(validate_option_value(bad).is_err(), "{bad:?}");
        }
    }
}
