//! Gluster's own per-brick operation counts: `volume profile NAME start|stop|info`.
//! Each brick's io-stats counts the calls it receives and their latency; what the
//! translators below it do (quota's marker, the posix layer) shows only in that latency.

use serde::Deserialize;

use crate::xml::{number, parse};
use crate::GlusterError;

/// What one brick received since profiling started or was last cleared.
#[derive(Debug, Clone, PartialEq)]
pub struct BrickProfile {
    pub brick: String,
    pub fops: Vec<FopStat>,
    /// Seconds the counters cover.
    pub duration_secs: u64,
}

/// One kind of call a brick received.
#[derive(Debug, Clone, PartialEq)]
pub struct FopStat {
    /// Gluster's name of the call: `CREATE`, `UNLINK`, `XATTROP`, `INODELK`...
    pub name: String,
    pub calls: u64,
    /// Mean time the brick took to answer one, in nanoseconds (io-stats measures with
    /// `gf_tsdiff`; gluster's text output labels the same numbers "us").
    pub avg_latency_ns: f64,
}

impl FopStat {
    /// Nanoseconds the brick spent on all of them.
    pub fn total_ns(&self) -> f64 {
        self.calls as f64 * self.avg_latency_ns
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Body {
    vol_profile: Option<ProfileXml>,
}

#[derive(Debug, Deserialize)]
struct ProfileXml {
    #[serde(default)]
    brick: Vec<BrickXml>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct BrickXml {
    brick_name: String,
    cumulative_stats: Option<StatsXml>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StatsXml {
    fop_stats: Option<FopsXml>,
    duration: String,
}

#[derive(Debug, Deserialize)]
struct FopsXml {
    #[serde(default)]
    fop: Vec<FopXml>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FopXml {
    name: String,
    hits: String,
    avg_latency: String,
}

/// Parses `volume profile NAME info cumulative --xml`: every brick's counters since
/// profiling started or was cleared. A brick that has received nothing has no fops.
pub fn parse_profile_info(command: &str, xml: &str) -> Result<Vec<BrickProfile>, GlusterError> {
    let body: Body = parse(command, xml)?;
    let profile = body.vol_profile.ok_or_else(|| GlusterError::Parse {
        command: command.to_string(),
        reason: "the answer has no volProfile".into(),
    })?;
    profile
        .brick
        .into_iter()
        .map(|b| {
            let Some(stats) = b.cumulative_stats else {
                return Err(GlusterError::Parse {
                    command: command.to_string(),
                    reason: format!("brick {} has no cumulativeStats", b.brick_name),
                });
            };
            let fops = stats
                .fop_stats
                .map(|f| f.fop)
                .unwrap_or_default()
                .into_iter()
                .map(|f| {
                    Ok(FopStat {
                        calls: number(command, "hits", &f.hits)?,
                        avg_latency_ns: number(command, "avgLatency", &f.avg_latency)?,
                        name: f.name,
                    })
                })
                .collect::<Result<_, GlusterError>>()?;
            Ok(BrickProfile {
                duration_secs: number(command, "duration", &stats.duration)?,
                brick: b.brick_name,
                fops,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // The shape cli-xml-output.c writes for `info cumulative`.
    const INFO: &str = r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<cliOutput><opRet>0</opRet><opErrno>0</opErrno><opErrstr/><volProfile>
<volname>v</volname><profileOp>3</profileOp><brickCount>2</brickCount>
<brick><brickName>n1:/b</brickName><cumulativeStats><blockStats/><fopStats>
<fop><name>CREATE</name><hits>1000</hits><avgLatency>812.500000</avgLatency><minLatency>90.0</minLatency><maxLatency>9000.0</maxLatency></fop>
<fop><name>XATTROP</name><hits>2000</hits><avgLatency>40.000000</avgLatency><minLatency>1.0</minLatency><maxLatency>100.0</maxLatency></fop>
</fopStats><duration>12</duration><totalRead>0</totalRead><totalWrite>4096000</totalWrite></cumulativeStats></brick>
<brick><brickName>n2:/b</brickName><cumulativeStats><blockStats/><fopStats/><duration>12</duration><totalRead>0</totalRead><totalWrite>0</totalWrite></cumulativeStats></brick>
</volProfile></cliOutput>"#;

    #[test]
    fn reads_each_bricks_calls_and_latency() {
        let p = parse_profile_info("profile", INFO).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].brick, "n1:/b");
        assert_eq!(p[0].duration_secs, 12);
        assert_eq!(p[0].fops.len(), 2);
        assert_eq!(p[0].fops[0].name, "CREATE");
        assert_eq!(p[0].fops[0].calls, 1000);
        assert_eq!(p[0].fops[0].total_ns(), 812_500.0);
        assert!(p[1].fops.is_empty());
    }

    #[test]
    fn a_bad_count_names_its_field() {
        let bad = INFO.replace("<hits>2000</hits>", "<hits>many</hits>");
        let e = parse_profile_info("profile", &bad).unwrap_err().to_string();
        assert!(e.contains("hits"), "{e}");
    }

    #[test]
    fn a_refusal_is_glusters_error() {
        let xml = r#"<cliOutput><opRet>-1</opRet><opErrno>30</opErrno><opErrstr>Profile on Volume v is not started</opErrstr></cliOutput>"#;
        let e = parse_profile_info("profile", xml).unwrap_err().to_string();
        assert!(e.contains("not started"), "{e}");
    }
}
