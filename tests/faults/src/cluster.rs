//! A throwaway PostgreSQL 15 server per test: its own data directory under /tmp, owned by
//! `postgres`, listening on 127.0.0.1 on a free port, `fsync=on`. Every server program runs
//! through `runuser -u postgres --` (the tests run as root). Dropping the guard stops the server
//! and removes the directory, also when the test panics (then the tail of the server log is
//! printed, and the whole log is copied to `target/faults-logs/`). Clients connect over TCP as any
//! login role (`connect_as`; trust authentication), by default as the superuser `postgres`.

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::thread;
use std::time::{Duration, Instant};

use postgres::{Client, Config, NoTls};

/// The superuser of every test cluster (`initdb -U postgres`).
pub const SUPERUSER: &str = "postgres";

pub fn pg_bin() -> PathBuf {
    PathBuf::from(
        std::env::var("FAULTS_PG_BIN").unwrap_or_else(|_| "/usr/lib/postgresql/15/bin".to_string()),
    )
}

/// A port nobody listens on: one the kernel picks, or with `FAULTS_PORTS=lo-hi` the first free one
/// of that range from a random start (for machines where other servers take fixed ports that the
/// kernel might hand out too).
fn free_port() -> u16 {
    if let Ok(range) = std::env::var("FAULTS_PORTS") {
        let (lo, hi) = range
            .split_once('-')
            .and_then(|(a, b)| Some((a.trim().parse::<u16>().ok()?, b.trim().parse::<u16>().ok()?)))
            .filter(|(a, b)| a <= b)
            .unwrap_or_else(|| panic!("FAULTS_PORTS must be lo-hi, not {range:?}"));
        let n = u32::from(hi - lo) + 1;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let start = (std::process::id() ^ nanos) % n;
        for i in 0..n {
            let port = lo + ((start + i) % n) as u16;
            if TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return port;
            }
        }
        panic!("no free port in FAULTS_PORTS={range}");
    }
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().unwrap().port()
}

pub struct Cluster {
    pub name: String,
    pub root: PathBuf,
    pub data: PathBuf,
    pub log: PathBuf,
    pub port: u16,
    bin: PathBuf,
}

impl Cluster {
    /// initdb, then start. `extra` are more `-c name=value` settings.
    pub fn start(name: &str, extra: &[&str]) -> Cluster {
        let root = PathBuf::from(format!(
            "/tmp/eventtime-faults-{}-{}",
            std::process::id(),
            name
        ));
        if root.exists() {
            let _ = fs::remove_dir_all(&root);
        }
        fs::create_dir_all(&root).expect("create the cluster directory");
        let c = Cluster {
            name: name.to_string(),
            data: root.join("data"),
            log: root.join("server.log"),
            root,
            port: free_port(),
            bin: pg_bin(),
        };
        let st = Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(&c.root)
            .status()
            .expect("chown");
        assert!(st.success(), "chown of {} failed", c.root.display());
        let out = c
            .pg_cmd("initdb")
            .arg("-D")
            .arg(&c.data)
            .args([
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ])
            .output()
            .expect("run initdb");
        check_output("initdb", &out);
        let mut conf = String::from("\n# eventtime fault tests\n");
        for s in [
            "listen_addresses = '127.0.0.1'".to_string(),
            format!("port = {}", c.port),
            format!("unix_socket_directories = '{}'", c.root.display()),
            "fsync = on".to_string(),
            "synchronous_commit = on".to_string(),
            "full_page_writes = on".to_string(),
            "max_connections = 60".to_string(),
            "log_lock_waits = on".to_string(),
            "log_line_prefix = '%m [%p] %e '".to_string(),
            "TimeZone = 'UTC'".to_string(),
        ] {
            conf += &s;
            conf.push('\n');
        }
        for s in extra {
            conf += s;
            conf.push('\n');
        }
        let path = c.data.join("postgresql.conf");
        let mut text = fs::read_to_string(&path).expect("read postgresql.conf");
        text += &conf;
        fs::write(&path, text).expect("write postgresql.conf");
        c.pg_ctl_start();
        c
    }

    pub fn pg_cmd(&self, prog: &str) -> Command {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "postgres", "--"]).arg(self.bin.join(prog));
        cmd.current_dir(&self.root);
        cmd
    }

    /// `pg_ctl start -w`; after a crash this runs crash recovery before it returns. Retries a few
    /// times (the shared memory of killed backends can take a moment to go).
    pub fn pg_ctl_start(&self) {
        let mut last = None;
        for _ in 0..10 {
            let out = self
                .pg_cmd("pg_ctl")
                .arg("-D")
                .arg(&self.data)
                .arg("-l")
                .arg(&self.log)
                .args(["-w", "-t", "180", "start"])
                .output()
                .expect("run pg_ctl start");
            if out.status.success() {
                self.wait_ready(Duration::from_secs(120));
                return;
            }
            last = Some(out);
            thread::sleep(Duration::from_millis(500));
        }
        let out = last.unwrap();
        panic!(
            "pg_ctl start failed: {}\n{}\n--- server log tail ---\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.log_tail(40)
        );
    }

    pub fn wait_ready(&self, limit: Duration) {
        let t = Instant::now();
        loop {
            match self.config("postgres", SUPERUSER).connect(NoTls) {
                Ok(_) => return,
                Err(e) if t.elapsed() < limit => {
                    let _ = e;
                    thread::sleep(Duration::from_millis(100));
                }
                Err(e) => panic!(
                    "server on port {} not ready after {:?}: {e}",
                    self.port, limit
                ),
            }
        }
    }

    /// The settings of a connection to database `db` as role `user` over TCP (trust
    /// authentication: any role that may log in connects without a password).
    pub fn config(&self, db: &str, user: &str) -> Config {
        let mut c = Config::new();
        c.host("127.0.0.1")
            .port(self.port)
            .user(user)
            .dbname(db)
            .connect_timeout(Duration::from_secs(10));
        c
    }

    /// A new connection as the superuser `postgres`, with `SET TimeZone = 'UTC'`.
    pub fn connect(&self, db: &str) -> Client {
        self.connect_as(db, SUPERUSER)
    }

    /// A new connection logged in as `user`, with `SET TimeZone = 'UTC'`.
    pub fn connect_as(&self, db: &str, user: &str) -> Client {
        self.try_connect_as(db, user).unwrap_or_else(|e| {
            panic!(
                "connect to {db} as {user} on port {}: {}",
                self.port,
                crate::db::describe(&e)
            )
        })
    }

    pub fn try_connect(&self, db: &str) -> Result<Client, postgres::Error> {
        self.try_connect_as(db, SUPERUSER)
    }

    pub fn try_connect_as(&self, db: &str, user: &str) -> Result<Client, postgres::Error> {
        let mut c = self.config(db, user).connect(NoTls)?;
        c.batch_execute("SET TimeZone = 'UTC'")?;
        Ok(c)
    }

    /// The postmaster's pid, from the first line of `postmaster.pid`.
    pub fn postmaster_pid(&self) -> Option<i32> {
        let text = fs::read_to_string(self.data.join("postmaster.pid")).ok()?;
        text.lines().next()?.trim().parse().ok()
    }

    /// Every process of this server: PostgreSQL processes run in the data directory, so this
    /// finds the postmaster, its backends and the orphans of a killed postmaster, and nothing else.
    pub fn server_pids(&self) -> Vec<i32> {
        let want = fs::canonicalize(&self.data).unwrap_or_else(|_| self.data.clone());
        let mut out = Vec::new();
        if let Ok(rd) = fs::read_dir("/proc") {
            for e in rd.flatten() {
                let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                    continue;
                };
                if let Ok(cwd) = fs::read_link(e.path().join("cwd")) {
                    if cwd == want {
                        out.push(pid);
                    }
                }
            }
        }
        out
    }

    /// `kill -9` of the postmaster, and of every other process of the server when
    /// `with_backends` (otherwise the backends are orphans that exit when they notice). Returns
    /// the postmaster's pid.
    pub fn kill9(&self, with_backends: bool) -> Result<i32, String> {
        let Some(pm) = self.postmaster_pid() else {
            return Err("no postmaster.pid".into());
        };
        // SAFETY: kill(2) on the pid of this test's own postmaster.
        if unsafe { libc::kill(pm, libc::SIGKILL) } != 0 {
            return Err(format!(
                "kill -9 {pm} failed: {}",
                std::io::Error::last_os_error()
            ));
        }
        if with_backends {
            for p in self.server_pids() {
                // SAFETY: a process running in this test's data directory: one of its backends.
                unsafe { libc::kill(p, libc::SIGKILL) };
            }
        }
        Ok(pm)
    }

    /// Starts the server again after `kill9`, once every process of the old one is gone and
    /// `pause` has passed; returns how long the start (crash recovery) took, in seconds.
    pub fn restart_after_kill(&self, pause: Duration) -> f64 {
        let t = Instant::now();
        // The orphans of a killed postmaster exit when they notice; the new postmaster refuses to
        // start while any of them holds the old shared memory.
        loop {
            let left = self.server_pids();
            if left.is_empty() {
                break;
            }
            if t.elapsed() > Duration::from_secs(20) {
                for p in left {
                    // SAFETY: kill(2) on a pid of this test's own server.
                    unsafe { libc::kill(p, libc::SIGKILL) };
                }
            }
            thread::sleep(Duration::from_millis(50));
        }
        thread::sleep(pause);
        let t = Instant::now();
        self.pg_ctl_start();
        t.elapsed().as_secs_f64()
    }

    pub fn log_tail(&self, n: usize) -> String {
        let text = fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Runs a server program (pg_dump, pg_restore, psql...) as postgres in the cluster directory.
    pub fn run(&self, prog: &str, args: &[&str]) -> Output {
        self.pg_cmd(prog)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("run {prog}: {e}"))
    }

    pub fn path(&self, file: &str) -> String {
        self.root.join(file).display().to_string()
    }

    fn stop(&self) {
        if self.data.join("postmaster.pid").exists() {
            let _ = self
                .pg_cmd("pg_ctl")
                .arg("-D")
                .arg(&self.data)
                .args(["-m", "immediate", "-w", "-t", "30", "stop"])
                .output();
        }
        let t = Instant::now();
        loop {
            let pids = self.server_pids();
            if pids.is_empty() {
                break;
            }
            if t.elapsed() > Duration::from_secs(5) {
                for p in pids {
                    // SAFETY: kill(2) on a pid of this test's own server.
                    unsafe { libc::kill(p, libc::SIGKILL) };
                }
            }
            if t.elapsed() > Duration::from_secs(30) {
                break;
            }
            thread::sleep(Duration::from_millis(100));
        }
    }
}

pub fn check_output(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let failed = thread::panicking();
        self.stop();
        if failed {
            eprintln!(
                "--- server log tail of test {} ({}) ---\n{}",
                self.name,
                self.log.display(),
                self.log_tail(60)
            );
            let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("target")
                .join("faults-logs");
            if fs::create_dir_all(&dir).is_ok() {
                let to = dir.join(format!("{}-{}.log", self.name, std::process::id()));
                if fs::copy(&self.log, &to).is_ok() {
                    eprintln!("whole server log copied to {}", to.display());
                }
            }
        }
        if std::env::var("FAULTS_KEEP").is_ok() {
            eprintln!("FAULTS_KEEP set: keeping {}", self.root.display());
        } else {
            let _ = fs::remove_dir_all(&self.root);
        }
    }
}
