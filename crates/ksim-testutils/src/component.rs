//! A stand-alone component (`ksim scheduler`, `ksim kubelet`, `ksim
//! deschedule`...) run as its own process against a [`TestCluster`]
//! through `--kubeconfig` (over HTTP, with no `$KUBECONFIG`), its logs in
//! a file of the test environment, killed when dropped; and the
//! descheduler policies the end-to-end tests share.

use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::TestCluster;

/// A descheduler policy with one profile running
/// RemovePodsViolatingNodeTaints under the default evictor.
pub const TAINTS_POLICY: &str = r#"
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: default
  pluginConfig:
  - name: DefaultEvictor
  - name: RemovePodsViolatingNodeTaints
  plugins:
    deschedule:
      enabled: [RemovePodsViolatingNodeTaints]
"#;

/// A stand-alone component running as a child process.
pub struct Component {
    child: Child,
    log: PathBuf,
}

impl Component {
    /// Starts `ksim <args> --kubeconfig <the cluster's>` without
    /// `$KUBECONFIG` (so the flag is what it uses); its stdout is kept for
    /// [`Component::wait`], its stderr (logs) goes to `<args[0]>.log`.
    pub fn start(cluster: &TestCluster, args: &[&str]) -> Self {
        let log = cluster.env().root().join(format!("{}.log", args[0]));
        let file = File::create(&log).expect("create the component's log");
        let kubeconfig = cluster.kubeconfig().to_str().expect("utf-8 path");
        let child = cluster
            .env()
            .ksim_command(args)
            .args(["--kubeconfig", kubeconfig])
            .env_remove("KUBECONFIG")
            .stdout(Stdio::piped())
            .stderr(file)
            .spawn()
            .expect("cannot start the component");
        Component { child, log }
    }

    /// What the component has logged so far.
    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits for the component to exit on its own: its status, stdout and
    /// logs. Fails the test (and kills it) if it is still running after
    /// `limit`, a hang.
    pub fn wait(&mut self, limit: Duration) -> (ExitStatus, String, String) {
        // wall-clock: a bound on a hung child process, not cluster time.
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("cannot wait for ksim") {
                let mut stdout = String::new();
                if let Some(mut pipe) = self.child.stdout.take() {
                    std::io::Read::read_to_string(&mut pipe, &mut stdout)
                        .expect("read the component's stdout");
                }
                return (status, stdout, self.logs());
            }
            if Instant::now() > deadline {
                // wall-clock: as above
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "the component did not return within {limit:?}; its logs:\n{}",
                    self.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// [`TestCluster::wait_for`], showing the component's logs on a timeout.
    #[track_caller]
    pub fn wait_for(
        &self,
        cluster: &TestCluster,
        args: &[&str],
        done: impl Fn(&str) -> bool,
    ) -> String {
        cluster
            .env()
            .wait_for_showing(args, done, || format!("\ncomponent logs:\n{}", self.logs()))
    }
}

impl Drop for Component {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
