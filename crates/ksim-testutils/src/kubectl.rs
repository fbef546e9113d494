//! More ways to drive the real kubectl in a [`KsimEnv`]: with extra
//! environment variables (`EDITOR` for `kubectl edit`), in the background
//! (`kubectl get -w`) with its output read while it runs, and small readers of
//! kubectl's output (JSON, table header). For tests: helpers panic on failure.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::{KsimEnv, KubectlOutput};

/// The kubectl the tests drive.
const KUBECTL: &str = "/usr/bin/kubectl";

fn kubectl_command(env: &KsimEnv, args: &[&str]) -> Command {
    let mut command = Command::new(Path::new(KUBECTL));
    command
        .env("KSIM_HOME", env.ksim_home())
        .env("KUBECONFIG", env.kubeconfig())
        .env("HOME", env.home())
        .stdin(Stdio::null())
        .arg("--request-timeout=20s")
        .args(args);
    command
}

/// Runs `kubectl --request-timeout=20s <args>` in `env` with the extra
/// environment variables `vars` (e.g. `EDITOR` for `kubectl edit`).
pub fn kubectl_with_env(env: &KsimEnv, vars: &[(&str, &str)], args: &[&str]) -> KubectlOutput {
    let mut command = kubectl_command(env, args);
    for (name, value) in vars {
        command.env(name, value);
    }
    let output = command.output().expect("cannot run kubectl");
    KubectlOutput {
        status: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Collects everything a pipe yields into a shared string, from a thread.
fn collect(mut pipe: impl Read + Send + 'static, sink: Arc<Mutex<String>>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        loop {
            match pipe.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => sink
                    .lock()
                    .expect("no reader panics while holding the lock")
                    .push_str(&String::from_utf8_lossy(&buffer[..n])),
            }
        }
    })
}

/// A kubectl running in the background (`kubectl get -w`), its output
/// collected as it comes. Killed on drop.
pub struct BackgroundKubectl {
    child: Child,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
    readers: Vec<JoinHandle<()>>,
}

impl BackgroundKubectl {
    /// Starts `kubectl --request-timeout=0 <args>` in `env` (no request
    /// timeout: watches must stay open).
    pub fn spawn(env: &KsimEnv, args: &[&str]) -> Self {
        let mut command = kubectl_command(env, &[]);
        // The later flag wins: watches are not cut after 20 s.
        command
            .arg("--request-timeout=0")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("cannot run kubectl");
        let stdout = Arc::new(Mutex::new(String::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let readers = vec![
            collect(
                child.stdout.take().expect("stdout was piped"),
                Arc::clone(&stdout),
            ),
            collect(
                child.stderr.take().expect("stderr was piped"),
                Arc::clone(&stderr),
            ),
        ];
        BackgroundKubectl {
            child,
            stdout,
            stderr,
            readers,
        }
    }

    /// What kubectl printed on stdout so far.
    pub fn stdout(&self) -> String {
        self.stdout
            .lock()
            .expect("no reader panics while holding the lock")
            .clone()
    }

    /// What kubectl printed on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .expect("no reader panics while holding the lock")
            .clone()
    }

    /// Waits (up to `timeout`) until stdout satisfies `ready`; panics with
    /// the output so far when it does not.
    #[track_caller]
    pub fn wait_for_stdout(&self, timeout: Duration, ready: impl Fn(&str) -> bool) {
        self.wait_until(timeout, "print", || ready(&self.stdout()));
    }

    /// Waits (up to `timeout`) until stderr satisfies `ready` (with `-v=6`
    /// kubectl logs its requests there: a sign it got so far).
    #[track_caller]
    pub fn wait_for_stderr(&self, timeout: Duration, ready: impl Fn(&str) -> bool) {
        self.wait_until(timeout, "log", || ready(&self.stderr()));
    }

    #[track_caller]
    fn wait_until(&self, timeout: Duration, what: &str, ready: impl Fn() -> bool) {
        let deadline = Instant::now() + timeout;
        while !ready() {
            assert!(
                Instant::now() < deadline,
                "kubectl did not {what} what was awaited within {timeout:?}\nstdout:\n{}\nstderr:\n{}",
                self.stdout(),
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills kubectl and returns everything it printed.
    pub fn stop(mut self) -> KubectlOutput {
        let _ = self.child.kill();
        let status = self
            .child
            .wait()
            .map(|s| s.code().unwrap_or(-1))
            .unwrap_or(-1);
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
        KubectlOutput {
            status,
            stdout: self.stdout(),
            stderr: self.stderr(),
        }
    }
}

impl Drop for BackgroundKubectl {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// kubectl's stdout parsed as JSON (after `-o json`); panics when it is not.
#[track_caller]
pub fn stdout_json(output: &KubectlOutput) -> serde_json::Value {
    output.success();
    serde_json::from_str(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "kubectl printed no JSON ({e}):\n{}\nstderr:\n{}",
            output.stdout, output.stderr
        )
    })
}

/// The first line of kubectl's stdout (a table's header).
pub fn header_line(output: &KubectlOutput) -> &str {
    output.stdout.lines().next().unwrap_or("")
}

/// Column-split rows of a table printed by kubectl, header excluded.
pub fn table_rows(output: &KubectlOutput) -> Vec<Vec<String>> {
    output
        .stdout
        .lines()
        .skip(1)
        .map(|line| line.split_whitespace().map(str::to_string).collect())
        .collect()
}
