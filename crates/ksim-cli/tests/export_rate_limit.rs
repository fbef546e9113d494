//! End to end: `ksim snapshot export --qps/--burst` holds every request it
//! sends to the source cluster to its client-side rate limit, discovery
//! included. A proxy between the export and a cluster made by `ksim create
//! cluster` counts the requests the cluster is sent; the export logs (at
//! debug level) the tokens its limiter handed out and each wait. No timing
//! is asserted: the counts must match, and with a burst smaller than the
//! export needs, the server has seen exactly the burst when the limiter
//! holds the next request (the pacing itself has a unit test in
//! ksim-snapshot).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ksim_testutils::{TestCluster, poll_until};

fn ksim_binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ksim"))
}

/// A TCP proxy to a local port counting the HTTP/1.1 requests sent through
/// it (each request line ends in ` HTTP/1.1\r\n`; an export only reads, so
/// no body holds that text).
struct CountingProxy {
    port: u16,
    requests: Arc<AtomicUsize>,
}

impl CountingProxy {
    fn start(upstream: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
        let port = listener.local_addr().expect("an address").port();
        let requests = Arc::new(AtomicUsize::new(0));
        let counted = requests.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                let (Ok(client_out), Ok(server_in)) = (client.try_clone(), server.try_clone())
                else {
                    continue;
                };
                let counted = counted.clone();
                std::thread::spawn(move || copy(client, server_in, Some(&counted)));
                std::thread::spawn(move || copy(server, client_out, None));
            }
        });
        CountingProxy { port, requests }
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

/// Copies `from` to `to` until either closes, counting request lines.
fn copy(mut from: TcpStream, mut to: TcpStream, requests: Option<&AtomicUsize>) {
    const MARK: &[u8] = b" HTTP/1.1\r\n";
    let mut buffer = [0u8; 16 * 1024];
    // The end of the previous read, for a mark cut in two.
    let mut tail: Vec<u8> = Vec::new();
    loop {
        let read = match from.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        if let Some(requests) = requests {
            let mut seen = std::mem::take(&mut tail);
            seen.extend_from_slice(&buffer[..read]);
            let found = seen.windows(MARK.len()).filter(|w| *w == MARK).count();
            requests.fetch_add(found, Ordering::SeqCst);
            let keep = seen.len().min(MARK.len() - 1);
            tail = seen[seen.len() - keep..].to_vec();
        }
        if to.write_all(&buffer[..read]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
}

/// The number after `field=` on the last line of `log` holding `message`.
fn logged(log: &str, message: &str, field: &str) -> Option<f64> {
    let line = log.lines().rev().find(|l| l.contains(message))?;
    let (_, after) = line.split_once(&format!("{field}="))?;
    after.split_whitespace().next()?.parse().ok()
}

#[test]
fn every_request_of_an_export_takes_a_token_of_its_rate_limit() {
    let cluster = TestCluster::start_api_only(ksim_binary());
    let env = cluster.env();
    for name in ["a", "b", "c", "d"] {
        cluster
            .kubectl(&["create", "configmap", name, "--from-literal=k=v"])
            .success();
    }
    let upstream = env.port(cluster.name()).expect("the cluster's port");
    let proxy = CountingProxy::start(upstream);
    let kubeconfig = env
        .ksim_ok(&["get", "kubeconfig", "--name", cluster.name()])
        .replace(
            &format!("127.0.0.1:{upstream}"),
            &format!("127.0.0.1:{}", proxy.port),
        );
    assert!(kubeconfig.contains(&format!("127.0.0.1:{}", proxy.port)));
    let kubeconfig = env.write_file("proxied.kubeconfig", &kubeconfig);
    let path = env.root().join("copy.yaml");
    let export = |burst: &str| {
        let mut command = env.ksim_command(&[
            "snapshot",
            "export",
            "--kubeconfig",
            kubeconfig.to_str().expect("utf-8"),
            "--path",
            path.to_str().expect("utf-8"),
            "--chunk-size",
            "1",
            "--qps",
            "0.001",
            "--burst",
            burst,
        ]);
        command.env(
            "RUST_LOG",
            "warn,ksim::commands::snapshot=debug,ksim_snapshot::api=debug,kube_client=off",
        );
        command
    };

    // A burst larger than the export needs: it runs through, and the server
    // saw one request per token the limiter handed out.
    let output = export("100000").output().expect("ksim runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let tokens = logged(&stderr, "tokens handed out", "tokens").expect("the tokens are logged");
    let sent = proxy.requests();
    assert_eq!(tokens, sent as f64, "{stderr}");
    assert!(sent > 8, "pages of one object each: {sent} requests");

    // A burst of half that at 0.001 qps: the server sees exactly the burst,
    // and then the limiter holds the next request (for about 1000 s).
    let burst = sent / 2;
    let log_path = env.root().join("export.log");
    let mut held = export(&burst.to_string())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_path).expect("the log file"))
        .spawn()
        .expect("ksim starts");
    let before = proxy.requests();
    let wait = poll_until("the limiter holds a request", || {
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        logged(&log, "waiting for the client-side rate limit", "seconds").ok_or(log)
    });
    poll_until("the burst reaches the server", || {
        let seen = proxy.requests() - before;
        (seen >= burst)
            .then_some(())
            .ok_or(format!("{seen} requests"))
    });
    let seen = proxy.requests() - before;
    let _ = held.kill();
    let _ = held.wait();
    assert_eq!(seen, burst);
    assert!(
        wait > 100.0,
        "the next token is 1000 s away, waited {wait} s"
    );
}
