//! A `ksim record` running in the background for a test: started in a
//! [`KsimEnv`], its log (info level) beside the recording, waited on until
//! it holds an object, stopped with SIGINT (it must exit 0) or killed; a
//! recorder still running when dropped is killed.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

use crate::{KsimEnv, poll_until};

/// A running `ksim record`.
pub struct Recorder {
    child: Option<Child>,
    path: PathBuf,
}

impl KsimEnv {
    /// Starts `ksim record <args> --path <path>`, logging at info level to
    /// `<path>.log`.
    pub fn start_recorder(&self, args: &[&str], path: &Path) -> Recorder {
        let log = std::fs::File::create(path.with_extension("log")).expect("the recorder's log");
        let child = self
            .ksim_command(&["record"])
            .args(args)
            .arg("--path")
            .arg(path)
            .env("RUST_LOG", "info,kube_client=off")
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("ksim record starts");
        Recorder {
            child: Some(child),
            path: path.to_path_buf(),
        }
    }
}

impl Recorder {
    /// The recording so far.
    pub fn text(&self) -> String {
        std::fs::read_to_string(&self.path).unwrap_or_default()
    }

    /// The recorder's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.path.with_extension("log")).unwrap_or_default()
    }

    /// Waits until the recording holds an object named `name`.
    #[track_caller]
    pub fn wait_for_object(&self, name: &str) {
        let wanted = format!("\"name\":\"{name}\"");
        poll_until(&format!("{name} is recorded"), || {
            self.text()
                .contains(&wanted)
                .then_some(())
                .ok_or_else(|| self.log())
        });
    }

    fn signal(&self, name: &str) {
        let child = self.child.as_ref().expect("running");
        let status = std::process::Command::new("kill")
            .args([format!("-{name}"), child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{name} failed");
    }

    /// Interrupts the recorder (SIGINT), which must exit 0; its stdout.
    #[track_caller]
    pub fn stop(mut self) -> String {
        self.signal("INT");
        let mut child = self.child.take().expect("running");
        let status = child.wait().expect("the recorder exits");
        let mut stdout = String::new();
        if let Some(mut pipe) = child.stdout.take() {
            pipe.read_to_string(&mut stdout).expect("its stdout");
        }
        assert!(
            status.success(),
            "ksim record exits 0 on SIGINT: {status}\n{}",
            self.log()
        );
        stdout
    }

    /// Kills the recorder (SIGKILL) and waits for it to be gone.
    pub fn kill(mut self) {
        self.signal("KILL");
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
