//! Processes of clusters: liveness (`kill(pid, 0)`, zombies count as dead),
//! starting `ksim serve` in the background, waiting for `/readyz`, and
//! stopping (SIGTERM, then SIGKILL after a grace period).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rustix::process::{Pid, Signal, kill_process, test_kill_process};

use super::state::ClusterDir;

/// How often readiness and exit are polled.
const POLL_INTERVAL: Duration = Duration::from_millis(5);

/// `pid` as a target for signals: only real processes, never init, a process
/// group or "every process" (0, 1 and negative pids).
fn to_pid(pid: i32) -> Option<Pid> {
    if pid > 1 { Pid::from_raw(pid) } else { None }
}

/// Whether process `pid` exists and is not a zombie.
pub fn is_alive(pid: i32) -> bool {
    let Some(pid) = to_pid(pid) else {
        return false;
    };
    if test_kill_process(pid).is_err_and(|e| e == rustix::io::Errno::SRCH) {
        return false;
    }
    // A zombie (exited, not yet reaped by its parent) still answers kill(pid, 0).
    match std::fs::read_to_string(format!("/proc/{}/stat", pid.as_raw_nonzero())) {
        Ok(stat) => !is_zombie_stat(&stat),
        Err(_) => true,
    }
}

/// Whether process `pid` runs `serve` (its arguments include `serve`); true
/// when `/proc` cannot tell.
pub fn is_serve_process(pid: i32) -> bool {
    match std::fs::read(format!("/proc/{pid}/cmdline")) {
        Ok(cmdline) => cmdline_has_serve(&cmdline),
        Err(_) => true,
    }
}

fn cmdline_has_serve(cmdline: &[u8]) -> bool {
    cmdline
        .split(|b| *b == 0)
        .skip(1)
        .any(|arg| arg == b"serve")
}

/// Whether a `/proc/<pid>/stat` line says the process is a zombie or dead.
/// The state follows the command name, which is in parentheses and may itself
/// hold spaces and parentheses.
fn is_zombie_stat(stat: &str) -> bool {
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next());
    matches!(state, Some("Z" | "X" | "x"))
}

fn send(pid: i32, signal: Signal) {
    if let Some(pid) = to_pid(pid) {
        let _ = kill_process(pid, signal);
    }
}

fn wait_for_exit(pid: i32, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout; // wall-clock: waits for a process
    while is_alive(pid) {
        let expired = Instant::now() >= deadline; // wall-clock: waits for a process
        if expired {
            return false;
        }
        std::thread::sleep(POLL_INTERVAL);
    }
    true
}

/// Stops process `pid`: SIGTERM, and SIGKILL if it still lives after `grace`.
pub fn stop(pid: i32, grace: Duration) -> anyhow::Result<()> {
    send(pid, Signal::TERM);
    if wait_for_exit(pid, grace) {
        return Ok(());
    }
    tracing::warn!(pid, "process did not exit after SIGTERM; sending SIGKILL");
    send(pid, Signal::KILL);
    if wait_for_exit(pid, Duration::from_secs(5)) {
        Ok(())
    } else {
        bail!("process {pid} did not exit after SIGKILL")
    }
}

/// Whether `GET http://127.0.0.1:<port>/readyz` answers 200.
pub fn probe_readyz(port: u16) -> bool {
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let Ok(mut stream) = TcpStream::connect_timeout(&address, Duration::from_millis(200)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
    let request = b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if stream.write_all(request).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    let mut read = 0;
    while read < head.len() {
        match stream.read(&mut head[read..]) {
            Ok(0) | Err(_) => return false,
            Ok(n) => read += n,
        }
    }
    head.starts_with(b"HTTP/1.") && &head[8..12] == b" 200"
}

/// Starts `<exe> serve --name <name> --port <port> <extra_args>` in its own process group,
/// stdin closed, stdout and stderr appended to the cluster's log (appended,
/// not truncated: a losing racer must not wipe the winner's log).
pub fn spawn_serve(
    exe: &Path,
    cluster: &ClusterDir,
    port: u16,
    extra_args: &[String],
) -> anyhow::Result<Child> {
    use std::os::unix::process::CommandExt;

    let log_path = cluster.log_path();
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("cannot create {}", log_path.display()))?;
    let log_err = log
        .try_clone()
        .with_context(|| format!("cannot open {}", log_path.display()))?;
    Command::new(exe)
        .args([
            "serve",
            "--name",
            cluster.name(),
            "--port",
            &port.to_string(),
        ])
        .args(extra_args)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        .process_group(0)
        .spawn()
        .with_context(|| format!("cannot start {}", exe.display()))
}

/// Waits until `child` has recorded itself as the cluster's process and its
/// `/readyz` answers 200; returns the port. Fails with the log's tail if the
/// child exits first or `timeout` passes (then the child is stopped).
pub fn wait_until_ready(
    child: &mut Child,
    cluster: &ClusterDir,
    timeout: Duration,
) -> anyhow::Result<u16> {
    let deadline = Instant::now() + timeout; // wall-clock: waits for a process
    let child_pid = i32::try_from(child.id()).ok();
    loop {
        if let Some(status) = child.try_wait().context("cannot wait for the cluster")? {
            bail!(
                "cluster {:?} exited before it was ready ({status}); {}",
                cluster.name(),
                log_tail(&cluster.log_path(), 10)
            );
        }
        if cluster.pid() == child_pid
            && let Some(port) = cluster.port().filter(|port| probe_readyz(*port))
        {
            return Ok(port);
        }
        let expired = Instant::now() >= deadline; // wall-clock: waits for a process
        if expired {
            let _ = child.kill();
            let _ = child.wait();
            cluster.clear_serving(child.id());
            bail!(
                "cluster {:?} was not ready after {timeout:?}; {}",
                cluster.name(),
                log_tail(&cluster.log_path(), 10)
            );
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// The last `lines` non-empty lines of the log at `path`, on one line.
pub fn log_tail(path: &Path, lines: usize) -> String {
    let Ok(bytes) = std::fs::read(path) else {
        return format!("no log at {}", path.display());
    };
    let text = String::from_utf8_lossy(&bytes);
    let mut tail: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .rev()
        .take(lines)
        .collect();
    tail.reverse();
    if tail.is_empty() {
        format!("log {} is empty", path.display())
    } else {
        format!("log {}: {}", path.display(), tail.join(" | "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zombie_state_is_read_after_the_command_name() {
        let cases = [
            ("123 (ksim) S 1 123", false),
            ("123 (ksim) R 1 123", false),
            ("123 (ksim) Z 1 123", true),
            ("123 (ksim) X 1 123", true),
            ("123 (a) Z (b) S 1", false),
            ("123 (odd ) name) Z 1", true),
            ("garbage", false),
        ];
        for (stat, zombie) in cases {
            assert_eq!(is_zombie_stat(stat), zombie, "{stat:?}");
        }
    }

    #[test]
    fn liveness_of_self_dead_and_invalid_pids() {
        let me = i32::try_from(std::process::id()).expect("pid fits i32");
        assert!(is_alive(me));
        for pid in [0, 1, -1, i32::MAX] {
            assert!(!is_alive(pid), "{pid}");
        }
        let mut child = Command::new("true").spawn().expect("spawn true");
        let pid = i32::try_from(child.id()).expect("pid fits i32");
        // Not reaped yet: a zombie, so dead.
        std::thread::sleep(Duration::from_millis(100));
        assert!(!is_alive(pid));
        child.wait().expect("reap");
        assert!(!is_alive(pid));
    }

    #[test]
    fn only_serve_command_lines_are_cluster_processes() {
        assert!(cmdline_has_serve(b"/bin/ksim\0serve\0--name\0a\0"));
        assert!(!cmdline_has_serve(b"/bin/serve\0--name\0a\0"));
        assert!(!cmdline_has_serve(b"/usr/bin/sleep\0infinity\0"));
        assert!(!cmdline_has_serve(b""));
        let me = i32::try_from(std::process::id()).expect("pid fits i32");
        assert!(!is_serve_process(me), "the test binary is not serving");
    }

    #[test]
    fn stop_terminates_a_sleeping_process() {
        let mut child = Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        let pid = i32::try_from(child.id()).expect("pid fits i32");
        assert!(is_alive(pid));
        stop(pid, Duration::from_secs(5)).expect("stop");
        assert!(!child.wait().expect("reap").success());
    }

    #[test]
    fn readyz_probe_needs_a_200() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let server = std::thread::spawn(move || {
            for answer in ["HTTP/1.1 200 OK\r\n\r\nok", "HTTP/1.1 500 Internal\r\n\r\n"] {
                let (mut conn, _) = listener.accept().expect("accept");
                let mut buf = [0u8; 512];
                let _ = conn.read(&mut buf);
                conn.write_all(answer.as_bytes()).expect("answer");
            }
        });
        assert!(probe_readyz(port));
        assert!(!probe_readyz(port));
        server.join().expect("server thread");
        assert!(!probe_readyz(port), "nothing listens any more");
    }

    #[test]
    fn log_tail_keeps_last_lines_on_one_line() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let path = tmp.path().join("ksim.log");
        std::fs::write(&path, "a\n\nb\nc\nd\n").expect("write");
        let tail = log_tail(&path, 2);
        assert!(tail.ends_with(": c | d"), "{tail}");
        assert!(log_tail(&tmp.path().join("none"), 2).starts_with("no log"));
    }
}
