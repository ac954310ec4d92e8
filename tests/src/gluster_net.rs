//! glusterd "nodes" on one machine, each in its own network namespace.
//!
//! Layout of one environment with id `gk<pid>-<n>`:
//! - namespace `<id>-sw` holds a bridge; nothing else lives there;
//! - namespaces `<id>-n1..nN` each have `eth0` on the bridge with 10.213.0.<i>/24, an XFS
//!   filesystem (a loop-mounted sparse file, `mkfs.xfs -i size=512` as in the seeds) for
//!   bricks, and a glusterd whose /var/lib/glusterd, /run/gluster and /var/log/glusterfs are
//!   bind mounts of the node's own directories inside a private mount namespace;
//! - namespace `<id>-c` is the client: FUSE mounts are made from there, so client traffic
//!   crosses the bridge like a real network. The mounts themselves are visible to the test.
//!
//! With TLS ([`GlusterNet::start_tls`]) each node's mount namespace also has its own
//! gluster TLS directory ([`GLUSTER_SSL_DIR`]: glusterfs.pem, .key, .ca) and a `secure-access` file in its /var/lib/glusterd,
//! so management and I/O can be encrypted with per-node certificates. Extra clients
//! ([`GlusterNet::add_client`]) get a namespace and address of their own and, likewise, their
//! own TLS directory and /var/lib/glusterd; their mounts appear to the test below
//! [`Client::mount_dir`].
//!
//! The addresses exist only inside these namespaces, so every environment can use the same
//! subnet; nothing is added to the machine's own network namespace.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use gk_gluster::{Gluster, ProcessRunner};
use gk_mount::{self as mount, Mounter};

use crate::{run, EnvError};

/// Where a failed test's gluster logs are kept (see `GlusterNet::keep_logs`).
pub const FAILED_LOGS: &str = "/var/tmp/glusterkube-failed";

/// Set once any thread of this process has panicked. An environment shared with spawned
/// tasks (an `Arc<GlusterNet>`) is often dropped when the runtime shuts down, on a thread
/// that is not the one unwinding, where `std::thread::panicking()` is false.
static PANICKED: AtomicBool = AtomicBool::new(false);

fn note_panics() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICKED.store(true, Ordering::SeqCst);
            previous(info);
        }));
    });
}

const SUBNET: &str = "10.213.0";
const CLIENT_HOST: u8 = 100;
const NS_PREFIX: &str = "gk";
/// Where Debian's gluster reads glusterfs.pem, .key and .ca: OpenSSL's directory, which is
/// /usr/lib/ssl there, not the /etc/ssl gluster's documentation names.
pub const GLUSTER_SSL_DIR: &str = "/usr/lib/ssl";

static NEXT: AtomicUsize = AtomicUsize::new(0);
/// Serialises making the shared mount point, which clients started at once would race for.
static SHARED_MOUNTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub struct Node {
    pub address: String,
    ns: String,
    dir: PathBuf,
    /// Behind a lock so a shared environment can stop and restart a node, as a pod restart
    /// does.
    glusterd: std::sync::Mutex<Option<Child>>,
}

impl Node {
    pub fn glusterd_socket(&self) -> PathBuf {
        self.dir.join("run/glusterd.socket")
    }

    /// The root of this node's XFS brick filesystem.
    pub fn brick_root(&self) -> PathBuf {
        self.dir.join("bricks")
    }

    /// The node's gluster log directory (its /var/log/glusterfs).
    pub fn log_dir(&self) -> PathBuf {
        self.dir.join("log")
    }

    /// The node's network namespace (`ip -n <ns> ...`).
    pub fn netns(&self) -> &str {
        &self.ns
    }

    /// Sets the node's link up or down. Down, the node vanishes from the network: nothing is
    /// closed and its packets are lost, as when a host or its switch port dies.
    pub fn set_link(&self, up: bool) -> Result<(), EnvError> {
        let state = if up { "up" } else { "down" };
        crate::run("ip", &["-n", &self.ns, "link", "set", "eth0", state]).map(|_| ())
    }

    /// The last `lines` lines of the node's glusterd log, for failure messages.
    pub fn glusterd_log_tail(&self, lines: usize) -> String {
        let log = std::fs::read_to_string(self.log_dir().join("glusterd.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(lines).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    /// The directory the node sees as [`GLUSTER_SSL_DIR`]. Writing new files here is what a
    /// rotated Secret does in a brick pod.
    pub fn ssl_dir(&self) -> PathBuf {
        self.dir.join("ssl")
    }

    /// Gives the node gluster's TLS (`files` in its TLS directory and a `secure-access` file,
    /// as a brick pod's Secret and entrypoint do) or takes it away. Returns whether TLS was
    /// switched: glusterd reads `secure-access` when it starts, so that needs a restart (new
    /// certificates do not: gluster reads them per connection).
    pub fn set_tls(&self, files: Option<&TlsFiles>) -> Result<bool, EnvError> {
        let ssl = self.ssl_dir();
        let secure = self.dir.join("lib/secure-access");
        let read = |n: &str| std::fs::read_to_string(ssl.join(n)).unwrap_or_default();
        let had = (
            read("glusterfs.pem"),
            read("glusterfs.key"),
            read("glusterfs.ca"),
        );
        let had_secure = secure.exists();
        std::fs::create_dir_all(self.dir.join("lib"))?;
        match files {
            Some(f) => {
                if had != (f.cert_pem.clone(), f.key_pem.clone(), f.ca_pem.clone()) {
                    f.write_to(&ssl)?;
                }
                // Its presence turns on TLS for glusterd's own connections.
                std::fs::write(&secure, "")?;
                Ok(!had_secure)
            }
            None => {
                for n in ["glusterfs.pem", "glusterfs.key", "glusterfs.ca"] {
                    let _ = std::fs::remove_file(ssl.join(n));
                }
                let _ = std::fs::remove_file(&secure);
                Ok(had_secure)
            }
        }
    }
}

/// Gluster's TLS files for one node or client: its certificate, key and the CA certificates
/// it trusts.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert_pem: String,
    pub key_pem: String,
    pub ca_pem: String,
}

impl TlsFiles {
    /// Writes glusterfs.pem, glusterfs.key and glusterfs.ca into `dir`, each replaced by a
    /// rename so gluster never reads a half-written file.
    pub fn write_to(&self, dir: &Path) -> Result<(), EnvError> {
        std::fs::create_dir_all(dir)?;
        for (name, text) in [
            ("glusterfs.pem", &self.cert_pem),
            ("glusterfs.key", &self.key_pem),
            ("glusterfs.ca", &self.ca_pem),
        ] {
            let tmp = dir.join(format!(".{name}.new"));
            std::fs::write(&tmp, text)?;
            std::fs::rename(&tmp, dir.join(name))?;
        }
        Ok(())
    }
}

/// A FUSE client with a network namespace, address, TLS directory and /var/lib/glusterd of its
/// own
/// (see [`GlusterNet::add_client`]).
pub struct Client {
    pub address: String,
    dir: PathBuf,
    mounts: PathBuf,
    holder: Child,
}

impl Client {
    /// A mounter whose FUSE client runs in this client's network and mount namespaces.
    pub fn mounter(&self) -> Mounter {
        Mounter {
            wrapper: vec![
                "nsenter".into(),
                "-t".into(),
                self.holder.id().to_string(),
                "--net".into(),
                "--mount".into(),
            ],
        }
    }

    /// The directory the client sees as [`GLUSTER_SSL_DIR`].
    pub fn ssl_dir(&self) -> PathBuf {
        self.dir.join("ssl")
    }

    /// A fresh mount point whose mounts the test sees too.
    pub fn mount_dir(&self, name: &str) -> Result<PathBuf, EnvError> {
        let dir = self.mounts.join(name);
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }

    /// A file for a client log, outside the mount points.
    pub fn log_file(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.log"))
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

/// A packet capture on the environment's bridge (`tshark`), started by
/// [`GlusterNet::capture`].
pub struct Capture {
    child: Child,
    file: PathBuf,
}

impl Capture {
    /// Stops the capture and returns the pcap file's bytes.
    pub fn finish(mut self) -> Result<Vec<u8>, EnvError> {
        // dumpcap hands packets over in batches; give the last ones time to reach the file,
        // then SIGINT lets tshark flush it.
        std::thread::sleep(Duration::from_secs(1));
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        );
        let _ = self.child.wait();
        Ok(std::fs::read(&self.file)?)
    }

    pub fn file(&self) -> &Path {
        &self.file
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub struct GlusterNet {
    id: String,
    root: PathBuf,
    nodes: Vec<Node>,
    client_ns: String,
    /// Namespaces of clients added later, deleted on teardown.
    extra_ns: std::sync::Mutex<Vec<String>>,
}

impl GlusterNet {
    /// Starts `n` glusterd nodes, not yet peered.
    pub fn start(n: usize) -> Result<Self, EnvError> {
        Self::start_with(n, None)
    }

    /// Starts `n` glusterd nodes with TLS on the management path: node `i` gets `tls[i]` as
    /// its glusterfs.{pem,key,ca} and a `secure-access` file. I/O TLS is a volume
    /// option (`client.ssl`, `server.ssl`).
    pub fn start_tls(tls: Vec<TlsFiles>) -> Result<Self, EnvError> {
        let n = tls.len();
        Self::start_with(n, Some(tls))
    }

    fn start_with(n: usize, tls: Option<Vec<TlsFiles>>) -> Result<Self, EnvError> {
        assert!((1..=20).contains(&n), "1 to 20 nodes");
        note_panics();
        cleanup_stale();
        let id = format!(
            "{NS_PREFIX}{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        );
        let root = std::env::temp_dir().join(&id);
        let mut net = GlusterNet {
            client_ns: format!("{id}-c"),
            extra_ns: std::sync::Mutex::new(Vec::new()),
            nodes: Vec::new(),
            root,
            id,
        };
        // From here on, Drop cleans up whatever part was made.
        net.build(n, tls)?;
        Ok(net)
    }

    fn build(&mut self, n: usize, tls: Option<Vec<TlsFiles>>) -> Result<(), EnvError> {
        std::fs::create_dir_all(&self.root)?;
        let sw = format!("{}-sw", self.id);
        run("ip", &["netns", "add", &sw])?;
        run("ip", &["-n", &sw, "link", "add", "br0", "type", "bridge"])?;
        run("ip", &["-n", &sw, "link", "set", "br0", "up"])?;
        for i in 1..=n {
            let ns = format!("{}-n{i}", self.id);
            let address = format!("{SUBNET}.{i}");
            self.nodes.push(Node {
                address: address.clone(),
                ns: ns.clone(),
                dir: self.root.join(format!("n{i}")),
                glusterd: std::sync::Mutex::new(None),
            });
            attach(&sw, &ns, &format!("v{i}"), &address)?;
            if let Some(files) = &tls {
                self.nodes[i - 1].set_tls(Some(&files[i - 1]))?;
            }
        }
        attach(
            &sw,
            &self.client_ns,
            "vc",
            &format!("{SUBNET}.{CLIENT_HOST}"),
        )?;
        for i in 0..n {
            self.start_node(i)?;
        }
        for node in &self.nodes {
            wait_for_glusterd(node)?;
        }
        Ok(())
    }

    fn start_node(&mut self, i: usize) -> Result<(), EnvError> {
        let node = &self.nodes[i];
        for sub in ["lib", "run", "log", "bricks", "ssl"] {
            std::fs::create_dir_all(node.dir.join(sub))?;
        }
        let img = node.dir.join("bricks.xfs");
        let img_s = img.to_str().expect("utf-8 path");
        run("truncate", &["-s", "2G", img_s])?;
        run("mkfs.xfs", &["-q", "-f", "-i", "size=512", img_s])?;
        run(
            "mount",
            &[
                "-o",
                // As the brick image mounts its disks (brick-image/entrypoint.sh).
                "loop,inode64,noatime,allocsize=64k",
                img_s,
                node.brick_root().to_str().expect("utf-8 path"),
            ],
        )?;
        // glusterd's unix socket defaults to /run/glusterd.socket, outside the bind mounts;
        // move it under /run/gluster so each node has its own.
        let stock = std::fs::read_to_string("/etc/glusterfs/glusterd.vol").map_err(|e| {
            EnvError::Setup(format!(
                "/etc/glusterfs/glusterd.vol: {e}; run tests/env/install-tools.sh"
            ))
        })?;
        let vol = stock.replace(
            "end-volume",
            "    option glusterd-sockfile /run/gluster/glusterd.socket\nend-volume",
        );
        let vol_path = node.dir.join("glusterd.vol");
        std::fs::write(&vol_path, vol)?;
        for shared in ["/var/lib/glusterd", "/run/gluster", "/var/log/glusterfs"] {
            std::fs::create_dir_all(shared)?;
        }
        self.spawn_glusterd(i)
    }

    /// Starts node `i`'s glusterd on its state and brick filesystem.
    fn spawn_glusterd(&self, i: usize) -> Result<(), EnvError> {
        let node = &self.nodes[i];
        let vol_path = node.dir.join("glusterd.vol");
        // A private /run makes the node look like a pod: glusterd's socket sits at the
        // default /run/glusterd.socket (a link into /run/gluster, which is the node's own
        // directory, so the test can reach the socket from outside too). Tools that only know
        // the default path, such as glfsheal behind `volume heal info`, then work unchanged.
        let d = node.dir.display();
        let script = format!(
            "mount --bind {d}/ssl {GLUSTER_SSL_DIR} && mount -t tmpfs gk-run /run && mkdir /run/gluster && \
             mount --bind {d}/run /run/gluster && ln -s gluster/glusterd.socket /run/glusterd.socket && \
             mount --bind {d}/lib /var/lib/glusterd && mount --bind {d}/log /var/log/glusterfs && \
             exec glusterd -N -f {}",
            vol_path.display()
        );
        let log = std::fs::File::create(node.dir.join("glusterd.out"))?;
        let child = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{}", node.ns))
            .args([
                "unshare",
                "--mount",
                "--propagation",
                "slave",
                "sh",
                "-c",
                &script,
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        *node.glusterd.lock().expect("glusterd lock") = Some(child);
        Ok(())
    }

    /// Stops node `i` as a pod going away would: every process in its network namespace
    /// (glusterd, bricks, self-heal daemon) is killed. State and bricks stay on disk.
    pub fn stop_node(&self, i: usize) {
        let node = &self.nodes[i];
        kill_namespaces(std::slice::from_ref(&node.ns));
        if let Some(mut child) = node.glusterd.lock().expect("glusterd lock").take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts node `i` again after [`GlusterNet::stop_node`], as a new pod on the same node
    /// would: glusterd comes up on its old state and starts the bricks of started volumes.
    pub fn restart_node(&self, i: usize) -> Result<(), EnvError> {
        // A new pod has a fresh /run: no pid files of the killed bricks, which glusterd would
        // otherwise take for running bricks while their zombies are not reaped yet.
        let vols = self.nodes[i].dir.join("run/vols");
        if vols.exists() {
            std::fs::remove_dir_all(&vols)?;
        }
        self.spawn_glusterd(i)?;
        wait_for_glusterd(&self.nodes[i])
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Gluster operations through node `i`'s glusterd (0-based). The CLI runs in the node's
    /// network and mount namespaces, as it does inside a brick pod: some commands (quota list,
    /// heal info) mount the volume or reach bricks themselves.
    pub fn gluster(&self, i: usize) -> Gluster<ProcessRunner> {
        let pid = self.glusterd_pid(i);
        // nsenter, unshare and sh all exec, so the child's pid is glusterd's.
        Gluster::new(ProcessRunner {
            program: [
                "nsenter",
                "-t",
                &pid.to_string(),
                "--net",
                "--mount",
                "gluster",
            ]
            .map(String::from)
            .to_vec(),
            glusterd_socket: None,
            timeout: Duration::from_secs(60),
        })
    }

    /// The pid of node `i`'s glusterd, whose namespaces are the node's.
    fn glusterd_pid(&self, i: usize) -> u32 {
        self.nodes[i]
            .glusterd
            .lock()
            .expect("glusterd lock")
            .as_ref()
            .map(|c| c.id())
            .expect("glusterd runs")
    }

    /// `program` run in node `i`'s network and mount namespaces, where its glusterd and
    /// bricks keep their pid files and sockets (nsenter execs: the child's pid is the
    /// program's).
    pub fn node_command(&self, i: usize, program: &Path) -> Command {
        let pid = self.glusterd_pid(i);
        let mut cmd = Command::new("nsenter");
        cmd.args(["-t", &pid.to_string(), "--net", "--mount"])
            .arg(program);
        cmd
    }

    /// Probes every node from the first and waits until all see each other connected.
    pub async fn form_pool(&self) -> Result<(), EnvError> {
        let first = self.gluster(0);
        for node in &self.nodes[1..] {
            first
                .peer_probe(&node.address)
                .await
                .map_err(|e| EnvError::Setup(e.to_string()))?;
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        for i in 0..self.nodes.len() {
            loop {
                let peers = self.gluster(i).peer_status().await;
                let ready = matches!(&peers, Ok(p) if p.len() == self.nodes.len() - 1
                    && p.iter().all(|p| p.connected && p.state == "Peer in Cluster"));
                if ready {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(EnvError::Setup(format!(
                        "node {} did not see the whole pool: {peers:?}",
                        i + 1
                    )));
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
        Ok(())
    }

    /// One brick per node, at `dir` below each node's brick filesystem, in node order.
    pub fn bricks(&self, dir: &str) -> Vec<gk_gluster::Brick> {
        self.nodes
            .iter()
            .map(|n| {
                let path = n.brick_root().join(dir);
                gk_gluster::Brick::new(&n.address, path.to_str().expect("utf-8 path"))
                    .expect("brick paths of this environment are valid")
            })
            .collect()
    }

    /// The mount source of a whole volume with every node as a volfile server.
    pub fn mount_source(&self, volume: &str) -> mount::MountSource {
        mount::MountSource {
            servers: self.nodes.iter().map(|n| n.address.clone()).collect(),
            volume: volume.into(),
            subdir: None,
        }
    }

    /// A mounter whose FUSE client runs in the client namespace.
    pub fn client_mounter(&self) -> Mounter {
        Mounter {
            wrapper: vec![
                "nsenter".into(),
                format!("--net=/run/netns/{}", self.client_ns),
            ],
        }
    }

    /// Adds a client namespace on the bridge with address `10.213.0.<host>` and its own
    /// mount namespace: its TLS directory holds `tls` if given, and /var/lib/glusterd holds
    /// `secure-access` if `secure_access` (gluster clients fetch their volfile over TLS then).
    pub fn add_client(
        &self,
        host: u8,
        tls: Option<&TlsFiles>,
        secure_access: bool,
    ) -> Result<Client, EnvError> {
        assert!(
            host as usize > self.nodes.len() && host != CLIENT_HOST && host < 255,
            "client address {host} collides with a node or the default client"
        );
        let ns = format!("{}-x{host}", self.id);
        self.extra_ns
            .lock()
            .expect("namespace list")
            .push(ns.clone());
        let address = format!("{SUBNET}.{host}");
        attach(
            &format!("{}-sw", self.id),
            &ns,
            &format!("x{host}"),
            &address,
        )?;
        let dir = self.root.join(format!("client-{host}"));
        for sub in ["ssl", "lib"] {
            std::fs::create_dir_all(dir.join(sub))?;
        }
        if let Some(files) = tls {
            files.write_to(&dir.join("ssl"))?;
        }
        if secure_access {
            std::fs::write(dir.join("lib/secure-access"), "")?;
        }
        self.holder(&ns, address, dir, &format!("c{host}"))
    }

    /// A client in node `i`'s network namespace that sees the node's TLS directory and
    /// /var/lib/glusterd, as processes inside a brick pod do (the brick agent's own mounts).
    pub fn node_client(&self, i: usize) -> Result<Client, EnvError> {
        let node = &self.nodes[i];
        self.holder(
            &node.ns,
            node.address.clone(),
            node.dir.clone(),
            &format!("n{}", i + 1),
        )
    }

    /// Starts the process holding a client's mount namespace: network namespace `netns`,
    /// `dir`/ssl as its TLS directory and `dir`/lib as its /var/lib/glusterd.
    fn holder(
        &self,
        netns: &str,
        address: String,
        dir: PathBuf,
        mounts_name: &str,
    ) -> Result<Client, EnvError> {
        // Mounts made inside the client's mount namespace reach the test's through a shared
        // mount; the client's own TLS directory and /var/lib/glusterd sit on the private root and
        // stay its own.
        let mounts = self.root.join("shared-mounts");
        {
            let _once = SHARED_MOUNTS.lock().expect("shared mounts lock");
            if !mounts.exists() {
                std::fs::create_dir_all(&mounts)?;
                let m = mounts.to_str().expect("utf-8 path");
                run("mount", &["--bind", m, m])?;
                run("mount", &["--make-shared", m])?;
            }
        }
        let mounts = mounts.join(mounts_name);
        std::fs::create_dir_all(&mounts)?;
        for sub in ["ssl", "lib"] {
            std::fs::create_dir_all(dir.join(sub))?;
        }
        let d = dir.display();
        let script = format!(
            "mount --bind {d}/ssl {GLUSTER_SSL_DIR} && mount --bind {d}/lib /var/lib/glusterd && \
             exec sleep infinity"
        );
        let holder = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{netns}"))
            .args([
                "unshare",
                "--mount",
                "--propagation",
                "unchanged",
                "sh",
                "-c",
                &script,
            ])
            .stdin(Stdio::null())
            .spawn()?;
        let client = Client {
            address,
            dir,
            mounts,
            holder,
        };
        // nsenter, unshare and sh exec, so the pid is sleep's once the binds are made.
        let comm = format!("/proc/{}/comm", client.holder.id());
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::read_to_string(&comm)
            .map(|c| c.trim() != "sleep")
            .unwrap_or(true)
        {
            if Instant::now() > deadline {
                return Err(EnvError::Setup(format!(
                    "client {mounts_name}: its namespace did not come up"
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(client)
    }

    /// Starts `tshark` on the bridge every node and client is attached to, writing to
    /// `name`.pcap in the scratch directory; returns once it is capturing.
    pub fn capture(&self, name: &str) -> Result<Capture, EnvError> {
        use std::io::BufRead;
        let file = self.scratch_dir("captures")?.join(format!("{name}.pcap"));
        let mut child = Command::new("ip")
            .args(["netns", "exec", &format!("{}-sw", self.id)])
            .args(["tshark", "-n", "-q", "-i", "br0", "-F", "pcap", "-w"])
            .arg(&file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| EnvError::Command {
                command: "tshark".into(),
                detail: format!("{e}; run tests/env/install-tools.sh"),
            })?;
        let stderr = child.stderr.take().expect("piped stderr");
        let mut lines = std::io::BufReader::new(stderr).lines();
        let mut seen = Vec::new();
        loop {
            match lines.next() {
                // dumpcap has opened its file once tshark names it.
                Some(Ok(line)) if line.contains("File:") && file.exists() => break,
                Some(Ok(line)) => seen.push(line),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(EnvError::Setup(format!(
                        "tshark did not start capturing: {}",
                        seen.join("; ")
                    )));
                }
            }
        }
        // Keep draining stderr so tshark never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Ok(Capture { child, file })
    }

    /// A failed test's gluster logs (each node's /var/log/glusterfs and glusterd's output)
    /// outlive the environment under [`FAILED_LOGS`], since its root is removed and a CI
    /// run's printed output shows only a tail.
    fn keep_logs(&self) {
        let kept = Path::new(FAILED_LOGS).join(&self.id);
        for node in &self.nodes {
            let to = kept.join(node.dir.file_name().unwrap_or_default());
            let copied = std::fs::create_dir_all(&to).is_ok()
                && Command::new("cp")
                    .arg("-a")
                    .arg(node.log_dir())
                    .arg(node.dir.join("glusterd.out"))
                    .arg(&to)
                    .status()
                    .is_ok_and(|s| s.success());
            if !copied {
                eprintln!(
                    "could not keep {}'s logs in {}",
                    node.dir.display(),
                    to.display()
                );
            }
        }
        eprintln!("gluster logs of {} kept in {}", self.id, kept.display());
    }

    /// A fresh directory for a mount point or a client log, under this environment's root.
    pub fn scratch_dir(&self, name: &str) -> Result<PathBuf, EnvError> {
        let dir = self.root.join("scratch").join(name);
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }

    fn teardown(&mut self) {
        // GK_KEEP_LOGS=1 keeps them after a run that passed too (a bench's, to read later).
        if std::thread::panicking()
            || PANICKED.load(Ordering::SeqCst)
            || std::env::var_os("GK_KEEP_LOGS").is_some_and(|v| v == "1")
        {
            self.keep_logs();
        }
        unmount_below(&self.root);
        let mut namespaces: Vec<String> = self.nodes.iter().map(|n| n.ns.clone()).collect();
        namespaces.push(self.client_ns.clone());
        namespaces.extend(
            self.extra_ns
                .lock()
                .expect("namespace list")
                .iter()
                .cloned(),
        );
        namespaces.push(format!("{}-sw", self.id));
        kill_namespaces(&namespaces);
        for node in &mut self.nodes {
            if let Some(mut child) = node.glusterd.lock().expect("glusterd lock").take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        unmount_below(&self.root);
        delete_namespaces(&namespaces);
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

impl Drop for GlusterNet {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// Creates namespace `ns` with `eth0` (address/24) whose peer `peer` joins br0 in `sw`.
fn attach(sw: &str, ns: &str, peer: &str, address: &str) -> Result<(), EnvError> {
    run("ip", &["netns", "add", ns])?;
    run(
        "ip",
        &[
            "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", peer, "netns", sw,
        ],
    )?;
    run(
        "ip",
        &["-n", sw, "link", "set", peer, "master", "br0", "up"],
    )?;
    run(
        "ip",
        &[
            "-n",
            ns,
            "addr",
            "add",
            &format!("{address}/24"),
            "dev",
            "eth0",
        ],
    )?;
    run("ip", &["-n", ns, "link", "set", "eth0", "up"])?;
    run("ip", &["-n", ns, "link", "set", "lo", "up"])?;
    Ok(())
}

fn wait_for_glusterd(node: &Node) -> Result<(), EnvError> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let sock = node.glusterd_socket();
    let sock_arg = format!("--glusterd-sock={}", sock.display());
    loop {
        let ok = Command::new("gluster")
            .args([sock_arg.as_str(), "--mode=script", "pool", "list"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if ok {
            return Ok(());
        }
        if Instant::now() > deadline {
            let log =
                std::fs::read_to_string(node.dir.join("log/glusterd.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            return Err(EnvError::Setup(format!(
                "glusterd at {} did not answer within 30 s; last log lines:\n{}",
                node.address,
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            )));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Unmounts every mount at or below `root`, deepest first.
fn unmount_below(root: &Path) {
    let Ok(mut points) = mount::mount_points() else {
        return;
    };
    points.retain(|p| p.starts_with(root));
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for p in points {
        if mount::unmount(&p).is_err() {
            // A FUSE mount whose client is gone can refuse a plain unmount; detach it.
            let _ = nix::mount::umount2(&p, nix::mount::MntFlags::MNT_DETACH);
        }
    }
}

fn kill_namespaces(namespaces: &[String]) {
    for _ in 0..50 {
        let mut alive = false;
        for ns in namespaces {
            let Ok(out) = Command::new("ip").args(["netns", "pids", ns]).output() else {
                continue;
            };
            for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                if let Ok(pid) = pid.parse::<i32>() {
                    alive = true;
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
            }
        }
        if !alive {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn delete_namespaces(namespaces: &[String]) {
    for ns in namespaces {
        let _ = Command::new("ip").args(["netns", "del", ns]).output();
    }
}

/// Removes environments left by test processes that died without running their Drop
/// (killed by a signal, for example).
fn cleanup_stale() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    let list = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut stale_ids = Vec::new();
    for name in list.lines().filter_map(|l| l.split_whitespace().next()) {
        let Some(rest) = name.strip_prefix(NS_PREFIX) else {
            continue;
        };
        let Some((pid, _)) = rest.split_once('-') else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let id = name
                .rsplit_once('-')
                .map(|(id, _)| id.to_string())
                .unwrap_or_default();
            if !stale_ids.contains(&id) {
                stale_ids.push(id);
            }
        }
    }
    for id in stale_ids {
        let namespaces: Vec<String> = list
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|n| n.starts_with(&format!("{id}-")))
            .map(String::from)
            .collect();
        let root = std::env::temp_dir().join(&id);
        unmount_below(&root);
        kill_namespaces(&namespaces);
        unmount_below(&root);
        delete_namespaces(&namespaces);
        let _ = std::fs::remove_dir_all(&root);
    }
}
