//! Directory quotas: `volume quota NAME enable|limit-usage|list|remove`.

use serde::Deserialize;

use crate::xml::{number, parse, yes_no};
use crate::GlusterError;

const COMMAND: &str = "volume quota list";

/// One usage limit as `volume quota NAME list` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaEntry {
    /// The directory, absolute within the volume.
    pub path: String,
    pub hard_limit_bytes: u64,
    /// The soft limit as a percentage of the hard limit (gluster's default is 80).
    pub soft_limit_percent: u8,
    pub used_bytes: u64,
    pub available_bytes: u64,
    pub soft_limit_exceeded: bool,
    pub hard_limit_exceeded: bool,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct QuotaBody {
    vol_quota: QuotaXml,
}

#[derive(Debug, Deserialize)]
struct QuotaXml {
    #[serde(default)]
    limit: Vec<LimitXml>,
}

#[derive(Debug, Deserialize)]
struct LimitXml {
    path: String,
    hard_limit: String,
    soft_limit_percent: String,
    used_space: String,
    avail_space: String,
    sl_exceeded: String,
    hl_exceeded: String,
}

/// Parses `gluster --xml volume quota NAME list`.
pub fn parse_quota_list(xml: &str) -> Result<Vec<QuotaEntry>, GlusterError> {
    let body: QuotaBody = parse(COMMAND, xml)?;
    body.vol_quota
        .limit
        .into_iter()
        .map(|l| {
            let percent = l.soft_limit_percent.trim();
            let soft_limit_percent: u8 = number(
                COMMAND,
                "soft_limit_percent",
                percent.strip_suffix('%').unwrap_or(percent),
            )?;
            if soft_limit_percent > 100 {
                return Err(GlusterError::Parse {
                    command: COMMAND.into(),
                    reason: format!("soft_limit_percent {percent:?} is over 100%"),
                });
            }
            Ok(QuotaEntry {
                path: l.path,
                hard_limit_bytes: number(COMMAND, "hard_limit", &l.hard_limit)?,
                soft_limit_percent,
                used_bytes: number(COMMAND, "used_space", &l.used_space)?,
                available_bytes: number(COMMAND, "avail_space", &l.avail_space)?,
                soft_limit_exceeded: yes_no(COMMAND, "sl_exceeded", &l.sl_exceeded)?,
                hard_limit_exceeded: yes_no(COMMAND, "hl_exceeded", &l.hl_exceeded)?,
            })
        })
        .collect()
}

/// Quota paths are directories inside the volume: absolute, without `..` or control
/// characters.
pub fn validate_quota_path(path: &str) -> Result<(), GlusterError> {
    let reason = if !path.starts_with('/') {
        "must be absolute inside the volume, for example /pvc-1234"
    } else if path.split('/').any(|p| p == "..") {
        "must not contain \"..\""
    } else if path.chars().any(char::is_control) {
        "must not contain control characters"
    } else if path.len() > 4096 {
        "is longer than 4096 bytes"
    } else {
        return Ok(());
    };
    Err(GlusterError::invalid(
        "quota path",
        format!("{path:?} {reason}"),
    ))
}

/// Gluster takes limits from 1 byte up to `i64::MAX`.
pub(crate) fn validate_quota_bytes(bytes: u64) -> Result<(), GlusterError> {
    if bytes == 0 || bytes > i64::MAX as u64 {
        return Err(GlusterError::invalid(
            "quota bytes",
            format!("{bytes} must be between 1 and {}", i64::MAX),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_limits() {
        let list = parse_quota_list(include_str!("../testdata/quota-list.xml")).unwrap();
        assert_eq!(
            list,
            [
                QuotaEntry {
                    path: "/pv1".into(),
                    hard_limit_bytes: 10 << 20,
                    soft_limit_percent: 80,
                    used_bytes: 10 << 20,
                    available_bytes: 0,
                    soft_limit_exceeded: true,
                    hard_limit_exceeded: true,
                },
                QuotaEntry {
                    path: "/pv2".into(),
                    hard_limit_bytes: 100 << 20,
                    soft_limit_percent: 50,
                    used_bytes: 3 << 20,
                    available_bytes: 101_711_872,
                    soft_limit_exceeded: false,
                    hard_limit_exceeded: false,
                }
            ]
        );
    }

    #[test]
    fn exceeded() {
        let list = parse_quota_list(include_str!("../testdata/quota-list-exceeded.xml")).unwrap();
        assert_eq!(list.len(), 1);
        assert!(list[0].hard_limit_exceeded && list[0].soft_limit_exceeded);
        assert_eq!(list[0].used_bytes, 10_485_760);
    }

    #[test]
    fn gluster_refusals_keep_their_text() {
        for (xml, text) in [
            (
                include_str!("../testdata/quota-list-none.xml"),
                "No quota configured on volume r3",
            ),
            (
                include_str!("../testdata/quota-list-disabled.xml"),
                "Quota is disabled, please enable quota",
            ),
        ] {
            match parse_quota_list(xml) {
                Err(GlusterError::Command { message, .. }) => assert_eq!(message, text),
                other => panic!("unexpected {other:?}"),
            }
        }
    }

    #[test]
    fn bad_flags_and_numbers_are_parse_errors() {
        let xml = include_str!("../testdata/quota-list-exceeded.xml");
        for (from, to) in [
            ("<sl_exceeded>Yes<", "<sl_exceeded>Maybe<"),
            ("<used_space>10485760<", "<used_space>N/A<"),
            ("<soft_limit_percent>80%<", "<soft_limit_percent>800%<"),
            ("<soft_limit_percent>80%<", "<soft_limit_percent>180%<"),
        ] {
            let bad = xml.replace(from, to);
            assert!(
                matches!(parse_quota_list(&bad), Err(GlusterError::Parse { .. })),
                "{to}"
            );
        }
    }

    #[test]
    fn paths_and_sizes() {
        for ok in ["/", "/pv1", "/a/b c/d", "/pvc-1234/"] {
            validate_quota_path(ok).unwrap();
        }
        for bad in ["", "pv1", "/a/../b", "/..", "/a\nb", "/a\0"] {
            assert!(
                matches!(
                    validate_quota_path(bad),
                    Err(GlusterError::Invalid {
                        field: "quota path",
                        ..
                    })
                ),
                "{bad:?}"
            );
        }
        validate_quota_bytes(1).unwrap();
        validate_quota_bytes(i64::MAX as u64).unwrap();
        assert!(validate_quota_bytes(0).is_err());
        assert!(validate_quota_bytes(i64::MAX as u64 + 1).is_err());
    }
}
