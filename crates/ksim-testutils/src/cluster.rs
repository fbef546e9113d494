//! End-to-end harness: runs `ksim` and `/usr/bin/kubectl` in a private
//! environment, so tests never touch the real `~/.kube` or `~/.ksim`.
//! Helpers panic with the full output when something fails: they are for tests.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The kubectl the tests drive.
const KUBECTL: &str = "/usr/bin/kubectl";

/// The name `TestCluster::start` gives its cluster (ksim's default).
pub const KSIM_CLUSTER_NAME: &str = "ksim";

/// Calls `check` every 200 ms until it returns `Ok`, and returns that;
/// fails the test after 60 s with `what` and the last `Err` (what was seen
/// instead). The end-to-end tests' one poller (a bound on a hang, not a
/// timing).
#[track_caller]
pub fn poll_until<T>(what: &str, mut check: impl FnMut() -> Result<T, String>) -> T {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60); // wall-clock: a test's bound on a hang of real processes, not cluster time
    loop {
        match check() {
            Ok(value) => return value,
            Err(seen) => assert!(
                std::time::Instant::now() < deadline, // wall-clock: as above
                "timed out waiting for {what}: {seen}"
            ),
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// The result of one kubectl run.
#[derive(Debug, Clone)]
pub struct KubectlOutput {
    /// Exit code (-1 if killed by a signal).
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

impl KubectlOutput {
    fn from_output(output: Output) -> Self {
        KubectlOutput {
            status: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// `self` if kubectl exited 0; panics with its stdout and stderr otherwise.
    #[track_caller]
    pub fn success(&self) -> &Self {
        assert!(
            self.status == 0,
            "kubectl failed with exit code {}\nstdout:\n{}\nstderr:\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
        self
    }

    /// `self` if kubectl failed; panics with its stdout otherwise.
    #[track_caller]
    pub fn failure(&self) -> &Self {
        assert!(
            self.status != 0,
            "kubectl unexpectedly succeeded\nstdout:\n{}",
            self.stdout
        );
        self
    }
}

/// A private environment for `ksim` and `kubectl`: a temporary directory
/// holding `KSIM_HOME` (`ksim-home/`), `KUBECONFIG` (`kubeconfig`) and `HOME`
/// (`home/`, where kubectl caches discovery). Deletes every cluster in it on drop.
pub struct KsimEnv {
    dir: tempfile::TempDir,
    ksim: PathBuf,
    ksim_home: PathBuf,
    kubeconfig: PathBuf,
    home: PathBuf,
}

impl KsimEnv {
    /// A fresh environment for the `ksim` binary at `ksim_binary`.
    pub fn new(ksim_binary: &Path) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("ksim-test-")
            .tempdir()
            .expect("cannot create a temporary directory");
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).expect("cannot create HOME");
        KsimEnv {
            ksim: ksim_binary.to_path_buf(),
            ksim_home: dir.path().join("ksim-home"),
            kubeconfig: dir.path().join("kubeconfig"),
            home,
            dir,
        }
    }

    /// The temporary directory holding everything.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// `KSIM_HOME`.
    pub fn ksim_home(&self) -> &Path {
        &self.ksim_home
    }

    /// The state directory of cluster `name`.
    pub fn cluster_dir(&self, name: &str) -> PathBuf {
        self.ksim_home().join("clusters").join(name)
    }

    /// `KUBECONFIG`.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// `HOME`.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// The pid recorded for cluster `name`, if any.
    pub fn pid(&self, name: &str) -> Option<i32> {
        std::fs::read_to_string(self.cluster_dir(name).join("pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// The port recorded for cluster `name`, if any.
    pub fn port(&self, name: &str) -> Option<u16> {
        std::fs::read_to_string(self.cluster_dir(name).join("port"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    fn command(&self, program: &Path) -> Command {
        let mut command = Command::new(program);
        command
            .env("KSIM_HOME", self.ksim_home())
            .env("KUBECONFIG", self.kubeconfig())
            .env("HOME", self.home())
            .stdin(Stdio::null());
        command
    }

    /// A `ksim <args>` command set up with this environment, to run as the
    /// test sees fit (in the background, with more variables...).
    pub fn ksim_command(&self, args: &[&str]) -> Command {
        let mut command = self.command(&self.ksim);
        command.args(args);
        command
    }

    /// Runs `ksim <args>` in this environment.
    pub fn ksim(&self, args: &[&str]) -> Output {
        self.ksim_command(args).output().expect("cannot run ksim")
    }

    /// Runs `ksim <args>`, which must succeed, and returns its stdout.
    #[track_caller]
    pub fn ksim_ok(&self, args: &[&str]) -> String {
        let output = self.ksim(args);
        assert!(
            output.status.success(),
            "ksim {args:?} failed\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Runs `ksim <args>`, which must fail, and returns its stderr.
    #[track_caller]
    pub fn ksim_err(&self, args: &[&str]) -> String {
        let output = self.ksim(args);
        assert!(
            !output.status.success(),
            "ksim {args:?} succeeded\nstdout:\n{}",
            String::from_utf8_lossy(&output.stdout)
        );
        String::from_utf8_lossy(&output.stderr).into_owned()
    }

    /// Writes `text` to the file `name` in the environment's root and
    /// returns its path.
    pub fn write_file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.root().join(name);
        std::fs::write(&path, text).expect("cannot write a file in the test environment");
        path
    }

    /// Polls `kubectl <args>` until it succeeds with a stdout that `done`
    /// accepts, and returns that stdout; fails the test after 60 s.
    #[track_caller]
    pub fn wait_for(&self, args: &[&str], done: impl Fn(&str) -> bool) -> String {
        self.wait_for_showing(args, done, String::new)
    }

    /// [`KsimEnv::wait_for`] against cluster `name` of this environment
    /// (`kubectl --context ksim-<name> <args>`).
    #[track_caller]
    pub fn wait_for_in(&self, name: &str, args: &[&str], done: impl Fn(&str) -> bool) -> String {
        in_context(name, args, |all| self.wait_for(all, done))
    }

    /// [`KsimEnv::wait_for`] whose timeout message ends with `context()`
    /// (a component's logs, say).
    #[track_caller]
    pub fn wait_for_showing(
        &self,
        args: &[&str],
        done: impl Fn(&str) -> bool,
        context: impl Fn() -> String,
    ) -> String {
        poll_until(&format!("kubectl {args:?}"), || {
            let output = self.kubectl(args);
            if output.status == 0 && done(&output.stdout) {
                return Ok(output.stdout);
            }
            Err(format!(
                "\nstdout:\n{}\nstderr:\n{}{}",
                output.stdout,
                output.stderr,
                context()
            ))
        })
    }

    /// Runs `kubectl --request-timeout=20s <args>` in this environment.
    pub fn kubectl(&self, args: &[&str]) -> KubectlOutput {
        let output = self
            .command(Path::new(KUBECTL))
            .arg("--request-timeout=20s")
            .args(args)
            .output()
            .expect("cannot run kubectl");
        KubectlOutput::from_output(output)
    }

    /// [`KsimEnv::kubectl`] against cluster `name` of this environment
    /// (`kubectl --context ksim-<name> <args>`).
    pub fn kubectl_in(&self, name: &str, args: &[&str]) -> KubectlOutput {
        in_context(name, args, |all| self.kubectl(all))
    }

    /// [`KsimEnv::kubectl_in`], which must succeed: its stdout.
    #[track_caller]
    pub fn kubectl_ok_in(&self, name: &str, args: &[&str]) -> String {
        let output = self.kubectl_in(name, args);
        output.success();
        output.stdout
    }

    /// [`KsimEnv::kubectl_stdin`] against cluster `name` of this environment.
    pub fn kubectl_stdin_in(&self, name: &str, args: &[&str], stdin: &str) -> KubectlOutput {
        in_context(name, args, |all| self.kubectl_stdin(all, stdin))
    }

    /// Like [`KsimEnv::kubectl`], with `stdin` as kubectl's standard input.
    pub fn kubectl_stdin(&self, args: &[&str], stdin: &str) -> KubectlOutput {
        let mut child = self
            .command(Path::new(KUBECTL))
            .arg("--request-timeout=20s")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot run kubectl");
        let mut pipe = child.stdin.take().expect("stdin was piped");
        let input = stdin.to_string();
        // Written from a thread so that a large input cannot deadlock against
        // a full stdout pipe.
        let writer = std::thread::spawn(move || {
            let _ = pipe.write_all(input.as_bytes());
        });
        let output = child.wait_with_output().expect("cannot wait for kubectl");
        let _ = writer.join();
        KubectlOutput::from_output(output)
    }

    /// Kills cluster `name`'s process without letting it clean up (SIGKILL),
    /// leaving stale state behind.
    pub fn kill_cluster_process(&self, name: &str) {
        let pid = self.pid(name).expect("cluster has no pid file");
        let status = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .expect("cannot run kill");
        assert!(status.success(), "kill -KILL {pid} failed");
    }
}

impl Drop for KsimEnv {
    fn drop(&mut self) {
        let deleted = self.ksim(&["delete", "cluster", "--all"]);
        if !deleted.status.success() {
            // Last resort: never leave a server behind.
            if let Ok(entries) = std::fs::read_dir(self.ksim_home().join("clusters")) {
                for entry in entries.flatten() {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    if let Some(pid) = self.pid(&name) {
                        let _ = Command::new("kill")
                            .args(["-KILL", &pid.to_string()])
                            .status();
                    }
                }
            }
        }
    }
}

/// A cluster made by `ksim create cluster` in its own [`KsimEnv`], deleted on drop.
pub struct TestCluster {
    env: KsimEnv,
    name: String,
}

impl TestCluster {
    /// Runs `<ksim_binary> create cluster --name ksim` in a fresh environment.
    pub fn start(ksim_binary: &Path) -> Self {
        Self::start_named(ksim_binary, KSIM_CLUSTER_NAME)
    }

    /// A cluster with the API server alone (`--disable
    /// kubelet,controllers,scheduler`): objects are stored and nothing acts
    /// on them, for tests of the API itself.
    pub fn start_api_only(ksim_binary: &Path) -> Self {
        Self::start_with(
            ksim_binary,
            KSIM_CLUSTER_NAME,
            &["--disable", "kubelet,controllers,scheduler"],
        )
    }

    /// Runs `<ksim_binary> create cluster --name <name>` in a fresh environment.
    pub fn start_named(ksim_binary: &Path, name: &str) -> Self {
        Self::start_with(ksim_binary, name, &[])
    }

    /// Runs `<ksim_binary> create cluster --name <name> <extra_args>` in a
    /// fresh environment.
    pub fn start_with(ksim_binary: &Path, name: &str, extra_args: &[&str]) -> Self {
        let env = KsimEnv::new(ksim_binary);
        let mut args = vec!["create", "cluster", "--name", name];
        args.extend_from_slice(extra_args);
        let output = env.ksim(&args);
        assert!(
            output.status.success(),
            "ksim create cluster --name {name} failed ({})\nstdout:\n{}\nstderr:\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
        );
        TestCluster {
            env,
            name: name.to_string(),
        }
    }

    /// The environment the cluster lives in.
    pub fn env(&self) -> &KsimEnv {
        &self.env
    }

    /// The cluster's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The kubeconfig holding the cluster's context (the current one).
    pub fn kubeconfig(&self) -> &Path {
        self.env.kubeconfig()
    }

    /// The cluster's URL, `http://127.0.0.1:PORT`.
    pub fn server(&self) -> String {
        let port = self
            .env
            .port(&self.name)
            .expect("the cluster has no port file");
        format!("http://127.0.0.1:{port}")
    }

    /// Runs `kubectl --request-timeout=20s <args>` against the cluster.
    pub fn kubectl(&self, args: &[&str]) -> KubectlOutput {
        self.env.kubectl(args)
    }

    /// Like [`TestCluster::kubectl`], with `stdin` as kubectl's standard input.
    pub fn kubectl_stdin(&self, args: &[&str], stdin: &str) -> KubectlOutput {
        self.env.kubectl_stdin(args, stdin)
    }

    /// Runs `ksim <args>` in the cluster's environment.
    pub fn ksim(&self, args: &[&str]) -> Output {
        self.env.ksim(args)
    }

    /// Runs `ksim <args>`, which must succeed, and returns its stdout.
    #[track_caller]
    pub fn ksim_ok(&self, args: &[&str]) -> String {
        self.env.ksim_ok(args)
    }

    /// Scales the cluster's simulated nodes to `replicas` (`ksim scale
    /// node`), which must succeed.
    #[track_caller]
    pub fn scale_nodes(&self, replicas: usize) {
        let replicas = replicas.to_string();
        self.env.ksim_ok(&[
            "scale",
            "node",
            "--replicas",
            &replicas,
            "--name",
            &self.name,
        ]);
    }

    /// Writes `text` to the file `name` in the environment's root and
    /// returns its path.
    pub fn write_file(&self, name: &str, text: &str) -> PathBuf {
        self.env.write_file(name, text)
    }

    /// Polls `kubectl <args>` until it succeeds with a stdout that `done`
    /// accepts, and returns that stdout; fails the test after 60 s.
    #[track_caller]
    pub fn wait_for(&self, args: &[&str], done: impl Fn(&str) -> bool) -> String {
        self.env.wait_for(args, done)
    }

    /// `kubectl get pods -o wide` rows as (name, status, node), polled
    /// until `done` holds; fails the test after 60 s, showing the rows.
    #[track_caller]
    pub fn pods_until(
        &self,
        what: &str,
        done: impl Fn(&[(String, String, String)]) -> bool,
    ) -> Vec<(String, String, String)> {
        poll_until(what, || {
            let output = self.kubectl(&["get", "pods", "-o", "wide"]);
            output.success();
            let header = output.stdout.lines().next().unwrap_or_default().to_string();
            let columns: Vec<&str> = header.split_whitespace().collect();
            let position = |name: &str| columns.iter().position(|c| *c == name);
            let rows: Vec<(String, String, String)> = match (position("STATUS"), position("NODE")) {
                (Some(status), Some(node)) => crate::kubectl::table_rows(&output)
                    .into_iter()
                    .map(|row| (row[0].clone(), row[status].clone(), row[node].clone()))
                    .collect(),
                _ => Vec::new(),
            };
            if done(&rows) {
                Ok(rows)
            } else {
                Err(format!("{rows:?}"))
            }
        })
    }

    /// Applies the CustomResourceDefinition manifest at `manifest` (named
    /// `crd_name`, e.g. `widgets.example.com`), waits until it is
    /// Established and until `kubectl get <crd_name>` is served (discovery
    /// may lag the CRD by a moment, as with kube-apiserver), and returns
    /// kubectl's output of the apply.
    pub fn apply_crd(&self, manifest: &Path, crd_name: &str) -> KubectlOutput {
        let manifest = manifest.to_str().expect("test paths are UTF-8");
        let applied = self.kubectl(&["apply", "-f", manifest]);
        applied.success();
        self.kubectl(&[
            "wait",
            "--for=condition=Established",
            &format!("crd/{crd_name}"),
            "--timeout=60s",
        ])
        .success();
        poll_until(&format!("{crd_name} served"), || {
            let listed = self.kubectl(&["get", crd_name]);
            if listed.status == 0 {
                Ok(())
            } else {
                Err(listed.stderr)
            }
        });
        applied
    }

    /// Applies the Widget CRD ([`crate::fixtures::widget_crd`]) as
    /// [`TestCluster::apply_crd`] does.
    pub fn apply_widget_crd(&self) -> KubectlOutput {
        let manifest = self.write_file("widgets-crd.json", &crate::fixtures::widget_crd_manifest());
        self.apply_crd(&manifest, crate::fixtures::WIDGET_CRD_NAME)
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        let _ = self.env.ksim(&["delete", "cluster", "--name", &self.name]);
    }
}

/// `run` given `--context=ksim-<name>` followed by `args`.
fn in_context<T>(name: &str, args: &[&str], run: impl FnOnce(&[&str]) -> T) -> T {
    let context = format!("--context=ksim-{name}");
    let mut all = vec![context.as_str()];
    all.extend_from_slice(args);
    run(&all)
}
