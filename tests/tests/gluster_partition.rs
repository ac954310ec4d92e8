//! Real glusterd on three "nodes" (network namespaces), volumes with the shipped profile: a
//! file deleted (and one renamed) while a node is cut off the network stays deleted (renamed)
//! once the node returns and heals, on replicate, arbiter and disperse, over several cuts with
//! the cut node rotated. `GK_CUT_ROUNDS` sets the cuts per layout (3 by default).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gk_api::crd::TuningProfile;
use gk_gluster::{Gluster, ProcessRunner, VolumeLayout};
use gk_mount as mount;
use gk_testenv::gluster_net::GlusterNet;
use gk_testenv::test_data as data;

fn rounds() -> usize {
    std::env::var("GK_CUT_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3)
}

#[tokio::test]
async fn replicate_deletes_and_renames_survive_cuts() {
    cuts(VolumeLayout::Replicate { replica: 3 }, "cutr3").await;
}

#[tokio::test]
async fn arbiter_deletes_and_renames_survive_cuts() {
    cuts(VolumeLayout::Arbiter, "cutarb").await;
}

#[tokio::test]
async fn disperse_deletes_and_renames_survive_cuts() {
    cuts(
        VolumeLayout::Disperse {
            data: 2,
            redundancy: 1,
        },
        "cutec",
    )
    .await;
}

/// A volume of `layout` named `name`, mounted, through [`rounds`] cuts, node `round % 3` cut
/// each time.
async fn cuts(layout: VolumeLayout, name: &str) {
    let net = GlusterNet::start(3).unwrap();
    net.form_pool().await.unwrap();
    let g = net.gluster(0);
    g.volume_create(name, layout, &net.bricks(name), false)
        .await
        .unwrap();
    for (k, v) in gk_operator::plan::options_at_create(TuningProfile::Tuned, layout, &[]) {
        g.volume_set(name, &k, &v).await.unwrap();
    }
    g.volume_start(name).await.unwrap();
    let target = net.scratch_dir(&format!("mnt-{name}")).unwrap();
    let log = net.scratch_dir("logs").unwrap().join(format!("{name}.log"));
    net.client_mounter()
        .mount(&net.mount_source(name), &target, &log, &[])
        .await
        .unwrap();
    for round in 0..rounds() {
        let started = Instant::now();
        cut_round(&net, name, &target, round, round % 3).await;
        eprintln!(
            "{name}: cut {round} of node {} passed in {:?}",
            round % 3 + 1,
            started.elapsed()
        );
    }
    mount::unmount(&target).unwrap();
}

/// One cut of node `cut` (0-based). Before it: a writer holding its lock on `victim-R.bin`
/// (fsync'd 4 KiB every 20 ms), and files `gone-R` and `moved-R`. While the node is away: the
/// writer stops and deletes its file, `gone-R` is deleted and `moved-R` renamed to
/// `moved-R.new`. After it returns and the volume heals, no brick holds the deleted or the old
/// names, and every brick holds the new one.
///
/// Why a writer holding a lock: gluster 10.3's locks translator holds an unlink while another
/// client holds a lock, and does not wake it when that client's connection is found dead;
/// unless the brick has dropped the writer's old connection before the heal gets there (the
/// Tuned profile's server keepalive), the heal waits forever.
async fn cut_round(net: &GlusterNet, name: &str, target: &Path, round: usize, cut: usize) {
    let victim = target.join(format!("victim-{round}.bin"));
    let gone = target.join(format!("gone-{round}"));
    let moved = target.join(format!("moved-{round}"));
    let renamed = target.join(format!("moved-{round}.new"));
    let kept = data(round as u64, 64 * 1024);
    std::fs::write(&gone, &kept).unwrap();
    std::fs::write(&moved, &kept).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (stop, path) = (stop.clone(), victim.clone());
        std::thread::spawn(move || {
            let f = File::create(&path).unwrap();
            let buf = data(7, 4096);
            let mut i = 0u64;
            while !stop.load(Ordering::SeqCst) {
                f.write_all_at(&buf, (i % 64) * 4096).unwrap();
                f.sync_data().unwrap();
                i += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            drop(f);
            std::fs::remove_file(&path).unwrap();
        })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    net.nodes()[cut].set_link(false).unwrap();
    let cut_at = Instant::now();
    // The mount gives the node up after its user timeout (2 s) and goes on without it.
    tokio::time::sleep(Duration::from_secs(4)).await;
    stop.store(true, Ordering::SeqCst);
    let (gone2, moved2, renamed2) = (gone.clone(), moved.clone(), renamed.clone());
    tokio::task::spawn_blocking(move || {
        writer
            .join()
            .map_err(|_| "the writer panicked".to_string())?;
        std::fs::remove_file(&gone2).map_err(|e| format!("delete: {e}"))?;
        std::fs::rename(&moved2, &renamed2).map_err(|e| format!("rename: {e}"))
    })
    .await
    .unwrap()
    .unwrap_or_else(|e| {
        let on: Vec<String> = net
            .bricks(name)
            .iter()
            .map(|b| {
                let [g, m, r] = [&gone, &moved, &renamed].map(|p| on_brick(b, p));
                format!("{b}: gone {g} moved {m} new {r}")
            })
            .collect();
        let log =
            std::fs::read_to_string(net.scratch_dir("logs").unwrap().join(format!("{name}.log")))
                .unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(25).collect();
        panic!(
            "{name}, cut {round} of node {}: {e}; through the mount: gone {} moved {} new {}; \
             on the bricks: {on:?}\nclient log:\n{}",
            cut + 1,
            gone.exists(),
            moved.exists(),
            renamed.exists(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        )
    });
    // Long enough for the bricks to find the mount's old connection to the node dead.
    tokio::time::sleep(Duration::from_secs(9).saturating_sub(cut_at.elapsed())).await;
    net.nodes()[cut].set_link(true).unwrap();
    // Heal info can say nothing is pending before the mount is back on the node's brick;
    // files made in between would then miss it, and the next cut would take a second copy.
    let back = mount_connected(target, name, round).await;
    eprintln!("{name}: cut {round}: the mount was back on every brick {back:?} after the return");
    healed(&net.gluster((cut + 1) % 3), name, round).await;

    for b in net.bricks(name) {
        let on = |p: &PathBuf| on_brick(&b, p);
        for (what, p) in [
            ("deleted", &victim),
            ("deleted", &gone),
            ("renamed", &moved),
        ] {
            assert!(
                !on(p),
                "{name}, cut {round}: the {what} {} is on {b}",
                p.display()
            );
        }
        assert!(
            on(&renamed),
            "{name}, cut {round}: {} is not on {b}",
            renamed.display()
        );
    }
    assert_eq!(
        std::fs::read(&renamed).unwrap(),
        kept,
        "{name}, cut {round}"
    );
    assert!(!victim.exists() && !gone.exists() && !moved.exists());
}

/// Whether brick `b` holds the file that `p` (a file at the mount's top) names.
fn on_brick(b: &gk_gluster::Brick, p: &Path) -> bool {
    Path::new(&b.path)
        .join(p.file_name().expect("a file name"))
        .exists()
}

/// Waits up to 60 s until the mount at `target` is connected to each of `name`'s three
/// bricks, as its client translators report in the mount's `.meta` directory.
async fn mount_connected(target: &Path, name: &str, round: usize) -> Duration {
    let started = Instant::now();
    loop {
        let states: Vec<String> = (0..3)
            .map(|i| {
                let private = target.join(format!(".meta/graphs/active/{name}-client-{i}/private"));
                // gluster's dump format: one "key = value" line per field.
                std::fs::read_to_string(&private)
                    .map(|text| {
                        text.lines()
                            .filter_map(|l| l.split_once(" = "))
                            .find(|(k, _)| k.trim() == "connected")
                            .map_or("no connected line".into(), |(_, v)| v.trim().to_string())
                    })
                    .unwrap_or_else(|e| format!("{}: {e}", private.display()))
            })
            .collect();
        if states.iter().all(|s| s == "1") {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{name}, cut {round}: the mount is not back on every brick after 60 s: {states:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Heals `name` until every brick is connected with nothing pending, within 90 s.
async fn healed(g: &Gluster<ProcessRunner>, name: &str, round: usize) {
    let back = Instant::now();
    let mut last;
    loop {
        let _ = g.heal_start(name).await;
        match g.heal_info_summary(name).await {
            Ok(b) if gk_gluster::all_healed(&b) => break,
            other => last = format!("{other:?}"),
        }
        assert!(
            back.elapsed() < Duration::from_secs(90),
            "{name}, cut {round}: the volume did not heal within 90 s of the node's return: {last}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
