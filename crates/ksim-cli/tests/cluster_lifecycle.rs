//! End-to-end tests of cluster life: `ksim create/delete/get cluster(s)`,
//! `get kubeconfig` and `serve`, driven as a user would (the `ksim` binary and
//! the real kubectl), each in its own temporary KSIM_HOME, KUBECONFIG and HOME.

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use ksim_testutils::{KsimEnv, TestCluster};

fn ksim_binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ksim"))
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[track_caller]
fn ok(output: Output) -> Output {
    assert!(
        output.status.success(),
        "ksim failed ({})\nstdout:\n{}\nstderr:\n{}",
        output.status,
        stdout(&output),
        stderr(&output)
    );
    output
}

fn create(env: &KsimEnv, name: &str) -> Output {
    ok(env.ksim(&["create", "cluster", "--name", name]))
}

fn clusters(env: &KsimEnv) -> String {
    stdout(&ok(env.ksim(&["get", "clusters"])))
}

fn contexts(env: &KsimEnv) -> String {
    env.kubectl(&["config", "get-contexts", "-o", "name"])
        .success()
        .stdout
        .clone()
}

fn current_context(env: &KsimEnv) -> String {
    let yaml = std::fs::read_to_string(env.kubeconfig()).expect("read kubeconfig");
    yaml.lines()
        .find_map(|l| l.strip_prefix("current-context:"))
        .map(|v| v.trim().trim_matches('"').to_string())
        .unwrap_or_default()
}

/// Whether process `pid` is gone (or a zombie nobody reaped yet).
fn process_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
    }
}

#[test]
fn create_get_and_delete_a_cluster() {
    let env = KsimEnv::new(ksim_binary());
    let created = create(&env, "ksim");
    assert_eq!(
        stdout(&created),
        format!(
            "Cluster \"ksim\" is ready. kubectl context \"ksim-ksim\" written to {}.\n",
            env.kubeconfig().display()
        )
    );
    assert_eq!(clusters(&env), "ksim\n");
    assert_eq!(current_context(&env), "ksim-ksim");
    let pid = env.pid("ksim").expect("pid file");
    assert!(!process_gone(pid));

    let deleted = ok(env.ksim(&["delete", "cluster"]));
    assert_eq!(stdout(&deleted), "Cluster \"ksim\" deleted.\n");
    assert_eq!(clusters(&env), "");
    assert!(process_gone(pid), "the server must be stopped");
    assert!(!env.cluster_dir("ksim").exists());
    assert_eq!(contexts(&env), "");
    assert_eq!(current_context(&env), "");
}

#[test]
fn creating_a_running_cluster_again_fails() {
    let cluster = TestCluster::start(ksim_binary());
    let again = cluster.ksim(&["create", "cluster"]);
    assert_eq!(again.status.code(), Some(1));
    assert_eq!(stderr(&again), "error: cluster \"ksim\" already exists\n");
    assert_eq!(stdout(&again), "");
    cluster.kubectl(&["version"]).success();
}

#[test]
fn deleting_an_unknown_cluster_fails() {
    let env = KsimEnv::new(ksim_binary());
    let deleted = env.ksim(&["delete", "cluster", "--name", "x"]);
    assert_eq!(deleted.status.code(), Some(1));
    assert_eq!(stderr(&deleted), "error: cluster \"x\" does not exist\n");
}

#[test]
fn kubectl_version_reports_the_server_version() {
    let cluster = TestCluster::start(ksim_binary());
    let version = cluster.kubectl(&["version"]);
    assert!(
        version.success().stdout.contains("Server Version: v1.33.0"),
        "{}",
        version.stdout
    );
    assert!(cluster.server().starts_with("http://127.0.0.1:"));
}

#[test]
fn two_clusters_run_side_by_side() {
    let env = KsimEnv::new(ksim_binary());
    create(&env, "a");
    create(&env, "b");
    assert_eq!(clusters(&env), "a\nb\n");
    assert_eq!(contexts(&env), "ksim-a\nksim-b\n");
    assert_eq!(current_context(&env), "ksim-b");
    assert_ne!(env.port("a"), env.port("b"));
    for context in ["ksim-a", "ksim-b"] {
        env.kubectl(&["--context", context, "version"]).success();
    }

    ok(env.ksim(&["delete", "cluster", "--name", "a"]));
    assert_eq!(clusters(&env), "b\n");
    assert_eq!(contexts(&env), "ksim-b\n");
    assert_eq!(current_context(&env), "ksim-b", "b's context stays current");
    env.kubectl(&["--context", "ksim-b", "version"]).success();
}

#[test]
fn delete_all_removes_every_cluster() {
    let env = KsimEnv::new(ksim_binary());
    create(&env, "a");
    create(&env, "b");
    let pids = [env.pid("a"), env.pid("b")].map(|p| p.expect("pid"));
    let deleted = ok(env.ksim(&["delete", "cluster", "--all"]));
    assert_eq!(
        stdout(&deleted),
        "Cluster \"a\" deleted.\nCluster \"b\" deleted.\n"
    );
    assert_eq!(clusters(&env), "");
    assert_eq!(contexts(&env), "");
    assert!(pids.iter().all(|pid| process_gone(*pid)));
    // Nothing left is not an error.
    ok(env.ksim(&["delete", "cluster", "--all"]));
}

#[test]
fn kubeconfig_merge_keeps_other_tools_entries() {
    let env = KsimEnv::new(ksim_binary());
    let other = "apiVersion: v1\nkind: Config\nclusters:\n- name: other\n  cluster:\n    server: https://10.0.0.1:6443\n    certificate-authority-data: QUJD\ncontexts:\n- name: other\n  context:\n    cluster: other\n    user: other\n    namespace: team\ncurrent-context: other\nusers:\n- name: other\n  user:\n    token: secret-token\n";
    std::fs::write(env.kubeconfig(), other).expect("write kubeconfig");

    create(&env, "ksim");
    assert_eq!(contexts(&env), "ksim-ksim\nother\n");
    assert_eq!(current_context(&env), "ksim-ksim");
    let merged = std::fs::read_to_string(env.kubeconfig()).expect("read");
    for kept in [
        "secret-token",
        "QUJD",
        "namespace: team",
        "https://10.0.0.1:6443",
    ] {
        assert!(merged.contains(kept), "{kept} lost:\n{merged}");
    }

    ok(env.ksim(&["delete", "cluster"]));
    assert_eq!(contexts(&env), "other\n");
    assert_eq!(
        current_context(&env),
        "",
        "ours was current, so it is unset"
    );
    let after = std::fs::read_to_string(env.kubeconfig()).expect("read");
    assert!(after.contains("secret-token"), "{after}");
}

#[test]
fn create_writes_to_the_first_path_of_kubeconfig_or_the_given_one() {
    let env = KsimEnv::new(ksim_binary());
    let first = env.root().join("first");
    let second = env.root().join("second");
    let list = format!("{}:{}", first.display(), second.display());
    let created = env
        .ksim_command(&["create", "cluster", "--name", "a"])
        .env("KUBECONFIG", &list)
        .output()
        .expect("run ksim");
    ok(created);
    assert!(first.exists() && !second.exists());

    let explicit = env.root().join("dir").join("explicit");
    let explicit_arg = explicit.to_str().expect("utf-8 path");
    ok(env.ksim(&[
        "create",
        "cluster",
        "--name",
        "b",
        "--kubeconfig",
        explicit_arg,
    ]));
    let written = std::fs::read_to_string(&explicit).expect("explicit kubeconfig");
    assert!(
        written.contains("ksim-b") && !written.contains("ksim-a"),
        "{written}"
    );
    assert!(!env.kubeconfig().exists(), "KUBECONFIG untouched");

    ok(env.ksim(&["delete", "cluster", "--all"]));
    let cleaned = std::fs::read_to_string(&explicit).expect("explicit kubeconfig");
    assert!(!cleaned.contains("ksim-b"), "{cleaned}");
    let cleaned = std::fs::read_to_string(&first).expect("first kubeconfig");
    assert!(!cleaned.contains("ksim-a"), "{cleaned}");
}

#[test]
fn create_listens_on_the_given_port() {
    let env = KsimEnv::new(ksim_binary());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    ok(env.ksim(&["create", "cluster", "--port", &port.to_string()]));
    assert_eq!(env.port("ksim"), Some(port));
    let config = std::fs::read_to_string(env.kubeconfig()).expect("kubeconfig");
    assert!(
        config.contains(&format!("http://127.0.0.1:{port}")),
        "{config}"
    );

    // A second cluster on a taken port fails with the server's reason.
    let taken = env.ksim(&[
        "create",
        "cluster",
        "--name",
        "b",
        "--port",
        &port.to_string(),
    ]);
    assert_eq!(taken.status.code(), Some(1));
    let message = stderr(&taken);
    assert!(
        message.starts_with("error: cluster \"b\" exited before it was ready"),
        "{message}"
    );
    assert!(message.contains("cannot listen on 127.0.0.1"), "{message}");
    assert_eq!(message.lines().count(), 1, "{message}");
    assert_eq!(clusters(&env), "ksim\n");
}

#[test]
fn get_kubeconfig_prints_a_working_kubeconfig() {
    let cluster = TestCluster::start(ksim_binary());
    let printed = ok(cluster.ksim(&["get", "kubeconfig"]));
    let yaml = stdout(&printed);
    assert!(yaml.contains(&cluster.server()), "{yaml}");
    let path = cluster.env().root().join("printed");
    std::fs::write(&path, &yaml).expect("write");
    let path = path.to_str().expect("utf-8 path");
    cluster
        .kubectl(&["--kubeconfig", path, "version"])
        .success();

    let unknown = cluster.ksim(&["get", "kubeconfig", "--name", "nope"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert_eq!(stderr(&unknown), "error: cluster \"nope\" does not exist\n");
}

#[test]
fn stale_state_of_a_dead_cluster_is_cleaned_up() {
    let env = KsimEnv::new(ksim_binary());
    create(&env, "ksim");
    let pid = env.pid("ksim").expect("pid");
    env.kill_cluster_process("ksim");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !process_gone(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(clusters(&env), "", "a dead cluster is not listed");

    // Creating it again replaces the stale state.
    create(&env, "ksim");
    assert_ne!(env.pid("ksim"), Some(pid));
    env.kubectl(&["version"]).success();

    // Deleting a dead cluster removes its state and entries.
    env.kill_cluster_process("ksim");
    ok(env.ksim(&["delete", "cluster"]));
    assert!(!env.cluster_dir("ksim").exists());
    assert_eq!(contexts(&env), "");
}

#[test]
fn serve_in_the_foreground_is_listed_and_cleans_up_on_sigterm() {
    let env = KsimEnv::new(ksim_binary());
    let mut serve = env
        .ksim_command(&["serve", "--name", "fg"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start ksim serve");
    let deadline = Instant::now() + Duration::from_secs(10);
    while env.pid("fg").is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(env.pid("fg"), i32::try_from(serve.id()).ok());
    assert_eq!(clusters(&env), "fg\n");

    let status = std::process::Command::new("kill")
        .args(["-TERM", &serve.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    assert!(
        serve.wait().expect("wait").success(),
        "SIGTERM is a clean exit"
    );
    assert_eq!(env.pid("fg"), None, "pid file removed");
    assert_eq!(env.port("fg"), None, "port file removed");
    assert_eq!(clusters(&env), "");
}

#[test]
fn bad_arguments_fail_with_one_line() {
    let env = KsimEnv::new(ksim_binary());
    let config = env.ksim(&["create", "cluster", "--config", "kwok.yaml"]);
    assert_eq!(config.status.code(), Some(1));
    assert_eq!(
        stderr(&config),
        "error: --config kwok.yaml: cluster configuration files are not supported yet\n"
    );
    let bad_name = env.ksim(&["create", "cluster", "--name", "../etc"]);
    assert_eq!(bad_name.status.code(), Some(1));
    assert!(stderr(&bad_name).starts_with("error: invalid cluster name \"../etc\""));
    assert_eq!(clusters(&env), "");
}

#[test]
fn a_recycled_pid_does_not_keep_a_cluster_alive() {
    let env = KsimEnv::new(ksim_binary());
    let mut other = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("start sleep");
    let dir = env.cluster_dir("ksim");
    std::fs::create_dir_all(&dir).expect("cluster dir");
    std::fs::write(dir.join("pid"), format!("{}\n", other.id())).expect("pid");
    std::fs::write(dir.join("port"), "1\n").expect("port");

    assert_eq!(clusters(&env), "");
    create(&env, "ksim");
    env.kubectl(&["version"]).success();
    ok(env.ksim(&["delete", "cluster"]));
    assert!(
        other.try_wait().expect("try_wait").is_none(),
        "sleep untouched"
    );
    let _ = other.kill();
    let _ = other.wait();
}

#[test]
fn a_relative_kubeconfig_path_is_cleaned_from_another_directory() {
    let env = KsimEnv::new(ksim_binary());
    let created = env
        .ksim_command(&["create", "cluster", "--kubeconfig", "rel/config"])
        .current_dir(env.root())
        .output()
        .expect("run ksim");
    ok(created);
    let path = env.root().join("rel").join("config");
    assert!(
        std::fs::read_to_string(&path)
            .expect("written")
            .contains("ksim-ksim")
    );
    ok(env.ksim(&["delete", "cluster"]));
    let cleaned = std::fs::read_to_string(&path).expect("still there");
    assert!(!cleaned.contains("ksim-ksim"), "{cleaned}");
}

#[test]
fn concurrent_creates_of_one_name_start_one_cluster() {
    let env = KsimEnv::new(ksim_binary());
    let racers: Vec<_> = (0..3)
        .map(|_| {
            env.ksim_command(&["create", "cluster"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("start ksim create")
        })
        .collect();
    let outputs: Vec<_> = racers
        .into_iter()
        .map(|r| r.wait_with_output().expect("wait"))
        .collect();
    let winners = outputs.iter().filter(|o| o.status.success()).count();
    assert_eq!(winners, 1, "{outputs:?}");
    for loser in outputs.iter().filter(|o| !o.status.success()) {
        assert!(
            stderr(loser).contains("already exists"),
            "{}",
            stderr(loser)
        );
    }
    assert_eq!(clusters(&env), "ksim\n");
    env.kubectl(&["version"]).success();
    assert_eq!(contexts(&env), "ksim-ksim\n");
}

#[test]
fn an_unreadable_kubeconfig_fails_before_starting_anything() {
    let env = KsimEnv::new(ksim_binary());
    std::fs::write(env.kubeconfig(), "clusters: [\n  - a: b\n").expect("write");
    let created = env.ksim(&["create", "cluster"]);
    assert_eq!(created.status.code(), Some(1));
    let message = stderr(&created);
    assert!(
        message.contains("invalid kubeconfig YAML: line 2"),
        "{message}"
    );
    assert_eq!(message.lines().count(), 1, "{message}");
    assert!(!env.cluster_dir("ksim").exists());
    assert_eq!(clusters(&env), "");
}
