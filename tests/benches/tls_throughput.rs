//! The throughput cost of gluster's TLS, measured side by side in one run: two replica-3
//! volumes on the same three glusterd nodes (management TLS on for both), one with I/O TLS
//! and the operator's access options (`gk_operator::tls::access`), one without, FUSE-mounted
//! from one client namespace. Each repetition writes a file sequentially (1 MiB writes, then
//! fsync) and reads it back through a fresh mount (so no page cache), alternating which volume
//! goes first.
//!
//!   cargo bench -p gk-testenv --bench tls_throughput -- [REPS] [MIB]
//!
//! Prints a Markdown table; docs/benchmarks/tls.md keeps the committed results.

use std::io::{Read, Write};
use std::path::Path;
use std::time::{Instant, SystemTime};

use gk_gluster::VolumeLayout;
use gk_mount as mount;
use gk_operator::pki::{Ca, Usage};
use gk_operator::tls::access::{volume_options, Access, CSI_CLIENT_IDENTITY};
use gk_testenv::gluster_net::{Client, GlusterNet, TlsFiles};

const CHUNK: usize = 1 << 20;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

async fn remount(client: &Client, net: &GlusterNet, volume: &str, dir: &Path) {
    if mount::is_mounted(dir).unwrap() {
        mount::unmount(dir).unwrap();
    }
    let source = net.mount_source(volume);
    client
        .mounter()
        .mount(&source, dir, &client.log_file(volume), &[])
        .await
        .unwrap();
}

/// MB/s writing then reading `mib` MiB at `dir/name`.
async fn one(
    client: &Client,
    net: &GlusterNet,
    volume: &str,
    dir: &Path,
    name: &str,
    mib: usize,
) -> (f64, f64) {
    let data = gk_testenv::test_data(7, CHUNK);
    let path = dir.join(name);
    let start = Instant::now();
    let mut f = std::fs::File::create(&path).unwrap();
    for _ in 0..mib {
        f.write_all(&data).unwrap();
    }
    f.sync_all().unwrap();
    drop(f);
    let write = mib as f64 * 1.048576 / start.elapsed().as_secs_f64();
    remount(client, net, volume, dir).await;
    let start = Instant::now();
    let mut f = std::fs::File::open(&path).unwrap();
    let mut buf = vec![0u8; CHUNK];
    let mut total = 0;
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        total += n;
    }
    let read = mib as f64 * 1.048576 / start.elapsed().as_secs_f64();
    assert_eq!(total, mib * CHUNK, "short read on {volume}");
    std::fs::remove_file(&path).unwrap();
    (write, read)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .filter_map(|a| a.parse().ok())
        .collect();
    let reps = args.first().copied().unwrap_or(5);
    let mib = args.get(1).copied().unwrap_or(256);

    let now = SystemTime::now();
    let ca = Ca::generate("gk-bench-ca", now).unwrap();
    let tls = |leaf: gk_operator::pki::CertKey| TlsFiles {
        cert_pem: leaf.cert_pem,
        key_pem: leaf.key_pem,
        ca_pem: ca.pem().cert_pem.clone(),
    };
    let names: Vec<String> = (1..=3).map(|i| format!("gk-node-{i}")).collect();
    let node_files = names
        .iter()
        .enumerate()
        .map(|(i, cn)| {
            let addr = format!("10.213.0.{}", i + 1);
            tls(ca.issue(cn, &[addr], Usage::Peer, now).unwrap())
        })
        .collect();
    let net = GlusterNet::start_tls(node_files).unwrap();
    net.form_pool().await.unwrap();
    let g = net.gluster(0);
    for vol in ["tls", "plain"] {
        g.volume_create(
            vol,
            VolumeLayout::Replicate { replica: 3 },
            &net.bricks(vol),
            false,
        )
        .await
        .unwrap();
    }
    let mut common_names = names.clone();
    common_names.push(CSI_CLIENT_IDENTITY.into());
    for (k, v) in volume_options(&Access::Tls { common_names }).unwrap() {
        g.volume_set("tls", &k, &v).await.unwrap();
    }
    for vol in ["tls", "plain"] {
        g.volume_start(vol).await.unwrap();
    }
    let client = net
        .add_client(
            101,
            Some(&tls(ca
                .issue(CSI_CLIENT_IDENTITY, &[], Usage::Client, now)
                .unwrap())),
            true,
        )
        .unwrap();
    let dirs = [
        ("tls", client.mount_dir("tls").unwrap()),
        ("plain", client.mount_dir("plain").unwrap()),
    ];
    for (vol, dir) in &dirs {
        remount(&client, &net, vol, dir).await;
    }

    let mut results: Vec<(Vec<f64>, Vec<f64>)> = vec![(vec![], vec![]), (vec![], vec![])];
    for rep in 0..reps {
        let order: [usize; 2] = if rep % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let (vol, dir) = &dirs[i];
            let (w, r) = one(&client, &net, vol, dir, &format!("f{rep}"), mib).await;
            eprintln!("rep {rep} {vol}: write {w:.1} MB/s, read {r:.1} MB/s");
            results[i].0.push(w);
            results[i].1.push(r);
        }
    }
    for (_, dir) in &dirs {
        mount::unmount(dir).unwrap();
    }
    let (tw, tr) = (median(results[0].0.clone()), median(results[0].1.clone()));
    let (pw, pr) = (median(results[1].0.clone()), median(results[1].1.clone()));
    println!("Replica 3 over three glusterd nodes in network namespaces, one FUSE client,");
    println!("{mib} MiB sequential, median of {reps} repetitions, in one run.\n");
    println!("| | write MB/s | read MB/s |");
    println!("|---|---:|---:|");
    println!("| I/O TLS (client.ssl, server.ssl) | {tw:.1} | {tr:.1} |");
    println!("| no I/O TLS | {pw:.1} | {pr:.1} |");
    println!("| ratio TLS / none | {:.2} | {:.2} |", tw / pw, tr / pr);
}
