//! Real glusterd on three "nodes" (network namespaces): the pool forms, a replica-3 volume
//! is created and started, FUSE-mounted from a client namespace, written and read back,
//! with checksums compared through the mount and on every brick.

use std::path::Path;

use gk_gluster::{Brick, VolumeLayout};
use gk_mount::{self as mount, MountSource};
use gk_testenv::gluster_net::GlusterNet;
use gk_testenv::test_data as data;
use sha2::{Digest, Sha256};

fn sha(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {path:?}: {e}"));
    format!("{:x}", Sha256::digest(bytes))
}

#[tokio::test]
async fn replica3_volume_is_created_mounted_written_and_read_back() {
    let net = GlusterNet::start(3).unwrap();
    net.form_pool().await.unwrap();

    let health = gk_agent::health(&net.gluster(0), &Default::default())
        .await
        .unwrap();
    assert_eq!((health.peers, health.peers_connected), (2, 2), "{health:?}");
    assert!(health.version.starts_with("glusterfs "), "{health:?}");

    let bricks: Vec<Brick> = net
        .nodes()
        .iter()
        .map(|n| Brick::new(&n.address, n.brick_root().join("r3").to_str().unwrap()).unwrap())
        .collect();
    let g = net.gluster(1);
    // Bricks sit on their own XFS filesystem, one host each: gluster needs no `force`.
    g.volume_create("r3", VolumeLayout::Replicate { replica: 3 }, &bricks, false)
        .await
        .unwrap();
    g.volume_start("r3").await.unwrap();

    let vol = net
        .gluster(2)
        .volume_info("r3")
        .await
        .unwrap()
        .expect("volume r3 exists");
    assert!(vol.is_started(), "{vol:?}");
    assert_eq!(
        (vol.type_name.as_str(), vol.replica_count),
        ("Replicate", 3)
    );
    let listed: Vec<&Brick> = vol.bricks.iter().map(|b| &b.brick).collect();
    assert_eq!(listed, bricks.iter().collect::<Vec<_>>());

    // Creating it again is refused by gluster, whose words reach us unchanged.
    let again = g
        .volume_create("r3", VolumeLayout::Replicate { replica: 3 }, &bricks, false)
        .await
        .unwrap_err()
        .to_string();
    assert!(again.contains("Volume r3 already exists"), "{again}");

    let target = net.scratch_dir("mnt-r3").unwrap();
    let log = net.scratch_dir("logs").unwrap().join("r3.log");
    let addrs: Vec<String> = net.nodes().iter().map(|n| n.address.clone()).collect();
    let source = MountSource {
        // The primary repeated among the backups would fail the mount; the list is cleaned.
        servers: vec![
            addrs[0].clone(),
            addrs[1].clone(),
            addrs[0].clone(),
            addrs[2].clone(),
        ],
        volume: "r3".into(),
        subdir: None,
    };
    let mounter = net.client_mounter();
    mounter.mount(&source, &target, &log, &[]).await.unwrap();
    assert!(mount::is_mounted(&target).unwrap());

    let mut expected = Vec::new();
    for i in 0..20u64 {
        let len = if i == 0 {
            8 << 20
        } else {
            (1 << 20) + i as usize * 4099
        };
        let bytes = data(i, len);
        let name = format!("file-{i:02}");
        std::fs::write(target.join(&name), &bytes).unwrap();
        expected.push((name, format!("{:x}", Sha256::digest(&bytes))));
    }
    mount::unmount(&target).unwrap();
    assert!(!mount::is_mounted(&target).unwrap());

    // A fresh mount reads every file back intact.
    mounter
        .mount(&source, &target, &log, &["ro".into()])
        .await
        .unwrap();
    for (name, sum) in &expected {
        assert_eq!(&sha(&target.join(name)), sum, "{name} through the mount");
    }
    assert!(
        std::fs::write(target.join("x"), b"x").is_err(),
        "ro mount accepted a write"
    );
    mount::unmount(&target).unwrap();

    // Replica 3: every brick holds a full copy.
    for b in &bricks {
        for (name, sum) in &expected {
            assert_eq!(&sha(&Path::new(&b.path).join(name)), sum, "{name} on {b}");
        }
    }

    // A mount whose gluster client died (ENOTCONN) is still unmounted, not taken for absent.
    mounter.mount(&source, &target, &log, &[]).await.unwrap();
    gk_testenv::kill_fuse_client(&target);
    assert!(
        !target.exists(),
        "stat should fail on a mount with a dead client"
    );
    mount::unmount(&target).unwrap();
    assert!(
        !mount::is_mounted(&target).unwrap(),
        "the dead mount is still there"
    );
}
