//! Client construction: in process (over the API server's router, no socket)
//! or from a kubeconfig (a ksim cluster over HTTP, or a real cluster).

use ksim_apiserver::ApiServer;

/// A `kube::Client` whose transport is the API server's router itself: the
/// same HTTP semantics as over the wire, without a socket. Must be called
/// inside a tokio runtime.
pub fn in_process(server: &ApiServer) -> kube::Client {
    kube::Client::new(server.router(), "default")
}
