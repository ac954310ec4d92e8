//! Real glusterd on three "nodes" (network namespaces), a replica-3 volume with the shipped
//! profile: a file deleted while a node is cut off the network is healed away once the node
//! returns.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gk_api::crd::TuningProfile;
use gk_gluster::VolumeLayout;
use gk_mount as mount;
use gk_testenv::gluster_net::GlusterNet;
use gk_testenv::test_data as data;

/// A writer holds its lock on a file on all three bricks when node 3 drops off the network;
/// it carries on with two, then deletes the file. When node 3 returns, self-heal must delete
/// the file there too. Gluster 10.3's locks translator holds an unlink while another client
/// holds a lock, and does not wake it when that client's connection is found dead: unless the
/// brick has dropped the writer's old connection before the heal gets there (the Tuned
/// profile's server keepalive), the heal waits forever.
#[tokio::test]
async fn a_file_deleted_while_a_node_is_cut_off_is_healed_away_when_it_returns() {
    let net = GlusterNet::start(3).unwrap();
    net.form_pool().await.unwrap();
    let g = net.gluster(0);
    let layout = VolumeLayout::Replicate { replica: 3 };
    g.volume_create("cut", layout, &net.bricks("cut"), false)
        .await
        .unwrap();
    for (k, v) in gk_operator::plan::options_at_create(TuningProfile::Tuned, layout, &[]) {
        g.volume_set("cut", &k, &v).await.unwrap();
    }
    g.volume_start("cut").await.unwrap();
    let target = net.scratch_dir("mnt-cut").unwrap();
    let log = net.scratch_dir("logs").unwrap().join("cut.log");
    net.client_mounter()
        .mount(&net.mount_source("cut"), &target, &log, &[])
        .await
        .unwrap();

    // One durable 4 KiB write every 20 ms; once told to stop, the file is closed and deleted.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (stop, path) = (stop.clone(), target.join("victim.bin"));
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
    net.nodes()[2].set_link(false).unwrap();
    let cut = Instant::now();
    // The mount gives node 3 up after its user timeout (2 s) and goes on with two bricks.
    tokio::time::sleep(Duration::from_secs(4)).await;
    stop.store(true, Ordering::SeqCst);
    tokio::task::spawn_blocking(move || writer.join())
        .await
        .unwrap()
        .expect("the writer wrote through the cut and deleted its file");
    // Long enough for the bricks to find the mount's old connection to node 3 dead.
    tokio::time::sleep(Duration::from_secs(9).saturating_sub(cut.elapsed())).await;
    net.nodes()[2].set_link(true).unwrap();

    let back = Instant::now();
    let mut last;
    loop {
        let _ = g.heal_start("cut").await;
        match g.heal_info_summary("cut").await {
            Ok(b)
                if !b.is_empty()
                    && b.iter().all(|b| {
                        b.connected && b.pending == Some(0) && b.split_brain == Some(0)
                    }) =>
            {
                break
            }
            other => last = format!("{other:?}"),
        }
        assert!(
            back.elapsed() < Duration::from_secs(90),
            "the volume did not heal within 90 s of node 3's return: {last}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    eprintln!("healed {:?} after node 3 returned", back.elapsed());
    for b in net.bricks("cut") {
        assert!(
            !Path::new(&b.path).join("victim.bin").exists(),
            "the deleted file is still on {b}"
        );
    }
    assert!(!target.join("victim.bin").exists());
    mount::unmount(&target).unwrap();
}
