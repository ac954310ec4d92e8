//! Runs inside the quota VM (tests/env/quota-vm.sh): starts the real `gk-agent serve` over
//! mutual TLS on 127.0.0.1 and drives a subdirectory PV's life through its RPCs on a volume
//! sized by project quotas, checking each step on the bricks themselves (project ids with
//! `xfs_io`, limits with `xfs_quota`). Prints `PASS|FAIL name: detail` lines.
//!
//!   vm-agent-rpcs AGENT ADDRESS VOLUME BRICK_ROOT...
//!
//! VOLUME must exist, be started, have its bricks on this node under the BRICK_ROOTs and
//! carry user.glusterkube.pv-quota=project. With GK_MOVE_VOLUME set, that volume (gluster's
//! quota on, a PV directory /pvc-old with a 10 MiB gluster limit, the option set to project
//! since) is then moved to project quotas through PvQuotaMove.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use gk_agent_proto::v1::brick_agent_client::BrickAgentClient;
use gk_agent_proto::v1::{
    HealthRequest, SubdirCreateRequest, SubdirDeleteRequest, SubdirGetRequest, VolumeRequest,
};
use gk_testenv::agents::TestPki;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

const MIB: u64 = 1 << 20;
const LISTEN: &str = "127.0.0.1:24050";

struct Report {
    failed: usize,
}

impl Report {
    fn check(&mut self, name: &str, ok: bool, detail: impl std::fmt::Display) {
        println!("{} {name}: {detail}", if ok { "PASS" } else { "FAIL" });
        if !ok {
            self.failed += 1;
        }
    }
}

/// `xfs_io -r -c lsproj DIR`'s project id; 0 when unreadable.
fn project_of(dir: &Path) -> u32 {
    let out = Command::new("xfs_io")
        .args(["-r", "-c", "lsproj"])
        .arg(dir)
        .output();
    out.ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .rsplit("= ")
                .next()
                .and_then(|n| n.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Project `id`'s hard block limit on the filesystem at `mount`, in KiB (0: none); with what
/// xfs_quota printed, for the report. `-v`: without it, a project that uses no blocks yet
/// (a new, empty PV) is not listed at all.
fn limit_kib(id: u32, mount: &Path) -> (u64, String) {
    let out = Command::new("xfs_quota")
        .args(["-x", "-c", &format!("quota -v -p -N -b {id}")])
        .arg(mount)
        .output();
    match out {
        Ok(o) => {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            let kib = text
                .split_whitespace()
                .nth(3)
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            (kib, text.trim().to_string())
        }
        Err(e) => (0, format!("xfs_quota: {e}")),
    }
}

/// The volume's bricks as paths on this node (the VM is its only node).
async fn bricks_of(
    c: &mut BrickAgentClient<Channel>,
    volume: &str,
) -> anyhow::Result<Vec<PathBuf>> {
    let vol = c
        .volume_info(VolumeRequest {
            name: volume.into(),
        })
        .await?
        .into_inner()
        .volume
        .ok_or_else(|| anyhow::anyhow!("volume {volume} is gone"))?;
    Ok(vol
        .bricks
        .iter()
        .filter_map(|b| b.split_once(':').map(|(_, p)| PathBuf::from(p)))
        .collect())
}

/// Each brick's project limit (its project `ids`, in order) on the disk of `roots` holding
/// it, in KiB, with what xfs_quota printed.
fn limits_of(bricks: &[PathBuf], ids: &[u32], roots: &[String]) -> (Vec<u64>, Vec<String>) {
    bricks
        .iter()
        .zip(ids)
        .map(|(b, id)| {
            let mount = roots
                .iter()
                .map(PathBuf::from)
                .filter(|r| b.starts_with(r))
                .max_by_key(|r| r.as_os_str().len())
                .unwrap_or_default();
            limit_kib(*id, &mount)
        })
        .unzip()
}

async fn client(pki: &TestPki) -> anyhow::Result<BrickAgentClient<Channel>> {
    let id = pki.issue("operator", &[], false)?;
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(pki.ca_pem()))
        .domain_name("localhost")
        .identity(Identity::from_pem(&id.cert, &id.key));
    let channel = Endpoint::from_shared(format!("https://{LISTEN}"))?
        .tls_config(tls)?
        .connect_lazy();
    Ok(BrickAgentClient::new(channel))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<ExitCode> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [agent, address, volume, roots @ ..] = args.as_slice() else {
        anyhow::bail!("usage: vm-agent-rpcs AGENT ADDRESS VOLUME BRICK_ROOT...");
    };
    anyhow::ensure!(!roots.is_empty(), "at least one BRICK_ROOT");
    let mut report = Report { failed: 0 };

    // The agent's certificate, as the operator issues it, and the operator's client one.
    let pki = TestPki::new("vm-ca")?;
    let tls_dir = PathBuf::from("/run/gk-agent-tls");
    std::fs::create_dir_all(&tls_dir)?;
    let server = pki.issue("agent", &["localhost", "127.0.0.1"], true)?;
    std::fs::write(tls_dir.join("ca.crt"), pki.ca_pem())?;
    std::fs::write(tls_dir.join("tls.crt"), &server.cert)?;
    std::fs::write(tls_dir.join("tls.key"), &server.key)?;
    let log = std::fs::File::create("/run/gk-agent.log")?;
    let mut serve = Command::new(agent);
    serve
        .args(["serve", "--listen", LISTEN, "--tls-dir"])
        .arg(&tls_dir)
        .args(["--advertise-address", address, "--volfile-server", address])
        .args(["--mount-root", "/run/gk-agent-mounts"]);
    for r in roots {
        serve.args(["--brick-root", r]);
    }
    let mut child = serve
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| anyhow::anyhow!("starting {agent} serve: {e}"))?;

    let mut result = drive(&mut report, &pki, volume, roots).await;
    if let (Ok(()), Ok(moving)) = (&result, std::env::var("GK_MOVE_VOLUME")) {
        result = move_to_projects(&mut report, &pki, &moving, roots).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    if let Err(e) = result {
        report.check("agent-rpc", false, format!("{e:#}"));
    }
    Ok(if report.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

async fn drive(
    report: &mut Report,
    pki: &TestPki,
    volume: &str,
    roots: &[String],
) -> anyhow::Result<()> {
    let mut c = client(pki).await?;
    let started = Instant::now();
    let health = loop {
        match c.health(HealthRequest {}).await {
            Ok(h) => break h.into_inner(),
            Err(_) if started.elapsed() < Duration::from_secs(60) => {
                tokio::time::sleep(Duration::from_millis(500)).await
            }
            Err(s) => anyhow::bail!("the agent did not answer Health within 60 s: {s}"),
        }
    };
    report.check(
        "rpc-health-disks",
        !health.disks.is_empty() && health.disks.iter().all(|d| d.project_quotas),
        format!(
            "Health after {:.1}s says project quotas on {:?}",
            started.elapsed().as_secs_f64(),
            health
                .disks
                .iter()
                .map(|d| (d.brick_root.as_str(), d.project_quotas))
                .collect::<Vec<_>>()
        ),
    );

    let bricks = bricks_of(&mut c, volume).await?;

    let path = "/pvc-rpc";
    let made = c
        .subdir_create(SubdirCreateRequest {
            volume: volume.into(),
            path: path.into(),
            limit_bytes: 10 * MIB,
        })
        .await?
        .into_inner();
    let ids: Vec<u32> = bricks
        .iter()
        .map(|b| project_of(&b.join("pvc-rpc")))
        .collect();
    let (limits, raw) = limits_of(&bricks, &ids, roots);
    report.check(
        "rpc-create",
        made.project_quota
            && made.enforced_bricks.len() == bricks.len()
            && ids.iter().all(|i| *i >= 65536)
            && limits.iter().all(|l| *l == 10240),
        format!(
            "SubdirCreate 10 MiB: project_quota={}, {} bricks enforce it; projects {ids:?}, limits (KiB) {limits:?} ({raw:?})",
            made.project_quota,
            made.enforced_bricks.len()
        ),
    );
    let info = c
        .volume_info(VolumeRequest {
            name: volume.into(),
        })
        .await?
        .into_inner()
        .volume
        .unwrap_or_default();
    let quota = info
        .options
        .get("features.quota")
        .cloned()
        .unwrap_or_default();
    report.check(
        "rpc-no-gluster-quota",
        quota != "on",
        format!("features.quota after the create: {quota:?}"),
    );

    let again = c
        .subdir_enforce(SubdirGetRequest {
            volume: volume.into(),
            path: path.into(),
        })
        .await?
        .into_inner();
    report.check(
        "rpc-enforce",
        again.enforced_bricks.len() == bricks.len() && again.bricks.len() == bricks.len(),
        format!(
            "SubdirEnforce: {} of {} bricks",
            again.enforced_bricks.len(),
            again.bricks.len()
        ),
    );

    let got = c
        .subdir_get(SubdirGetRequest {
            volume: volume.into(),
            path: path.into(),
        })
        .await?
        .into_inner();
    report.check(
        "rpc-get",
        got.limit_bytes == 10 * MIB,
        format!("SubdirGet: {} bytes", got.limit_bytes),
    );

    let grown = c
        .subdir_expand(SubdirCreateRequest {
            volume: volume.into(),
            path: path.into(),
            limit_bytes: 20 * MIB,
        })
        .await?
        .into_inner();
    let (limits, raw) = limits_of(&bricks, &ids, roots);
    report.check(
        "rpc-expand",
        grown.project_quota && limits.iter().all(|l| *l == 20480),
        format!("SubdirExpand 20 MiB: limits (KiB) {limits:?} ({raw:?})"),
    );

    let listed = c
        .subdir_list(VolumeRequest {
            name: volume.into(),
        })
        .await?
        .into_inner();
    let entry = listed.entries.iter().find(|e| e.path == path);
    report.check(
        "rpc-list",
        entry.is_some_and(|e| e.hard_limit_bytes == 20 * MIB),
        format!("SubdirList: {entry:?}"),
    );

    let conflict = c
        .subdir_create(SubdirCreateRequest {
            volume: volume.into(),
            path: path.into(),
            limit_bytes: 10 * MIB,
        })
        .await;
    report.check(
        "rpc-create-conflict",
        conflict
            .as_ref()
            .is_err_and(|s| s.code() == tonic::Code::AlreadyExists),
        format!(
            "SubdirCreate of the same path with another size: {:?}",
            conflict
                .map(|_| ())
                .map_err(|s| (s.code(), s.message().to_string()))
        ),
    );

    let deleted = c
        .subdir_delete(SubdirDeleteRequest {
            volume: volume.into(),
            path: path.into(),
        })
        .await?
        .into_inner();
    let (limits, raw) = limits_of(&bricks, &ids, roots);
    let left: Vec<&PathBuf> = bricks
        .iter()
        .filter(|b| b.join("pvc-rpc").exists())
        .collect();
    report.check(
        "rpc-delete",
        deleted.deleted && left.is_empty() && limits.iter().all(|l| *l == 0),
        format!(
            "SubdirDelete: deleted={}, left on {left:?}, limits (KiB) after {limits:?} ({raw:?})",
            deleted.deleted
        ),
    );
    Ok(())
}

/// PvQuotaMove on a pool made with gluster's quota: a step records the PV's gluster limit as
/// its size and gives every brick its project limit while gluster's quota stays on; the
/// finishing step turns gluster's quota off; the PV keeps its size.
async fn move_to_projects(
    report: &mut Report,
    pki: &TestPki,
    volume: &str,
    roots: &[String],
) -> anyhow::Result<()> {
    use gk_agent_proto::v1::PvQuotaMoveRequest;
    let mut c = client(pki).await?;
    // Steps until this node's bricks enforce every PV, as the operator takes one per
    // reconcile: a brick its fresh mount did not reach yet gets the record at the next.
    let mut steps = 0;
    let step = loop {
        steps += 1;
        let step = c
            .pv_quota_move(PvQuotaMoveRequest {
                volume: volume.into(),
                finish: false,
            })
            .await?
            .into_inner();
        if steps == 10 || step.enforced_here >= step.pvs * step.bricks_here {
            break step;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    let bricks = bricks_of(&mut c, volume).await?;
    let ids: Vec<u32> = bricks
        .iter()
        .map(|b| project_of(&b.join("pvc-old")))
        .collect();
    let (limits, raw) = limits_of(&bricks, &ids, roots);
    report.check(
        "move-step",
        step.pvs == 1
            && step.bricks_here == 3
            && step.enforced_here == 3
            && step.not_enforced_here.is_empty()
            && step.gluster_quota_on
            && limits.iter().all(|l| *l == 10240),
        format!(
            "PvQuotaMove after {steps} step(s): {} PV, {} of {} bricks enforce it ({:?}), gluster's quota still on: {}; limits (KiB) {limits:?} ({raw:?})",
            step.pvs, step.enforced_here, step.bricks_here, step.not_enforced_here, step.gluster_quota_on
        ),
    );
    let done = c
        .pv_quota_move(PvQuotaMoveRequest {
            volume: volume.into(),
            finish: true,
        })
        .await?
        .into_inner();
    let quota = c
        .volume_info(VolumeRequest {
            name: volume.into(),
        })
        .await?
        .into_inner()
        .volume
        .unwrap_or_default()
        .options
        .get("features.quota")
        .cloned()
        .unwrap_or_default();
    report.check(
        "move-finish",
        !done.gluster_quota_on && quota != "on",
        format!(
            "PvQuotaMove finish: gluster_quota_on={}, features.quota={quota:?}",
            done.gluster_quota_on
        ),
    );
    let got = c
        .subdir_get(SubdirGetRequest {
            volume: volume.into(),
            path: "/pvc-old".into(),
        })
        .await?
        .into_inner();
    report.check(
        "move-size-kept",
        got.limit_bytes == 10 * MIB,
        format!("SubdirGet after the move: {} bytes", got.limit_bytes),
    );
    Ok(())
}
