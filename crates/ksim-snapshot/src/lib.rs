//! Snapshots of a cluster and records of its changes, all through the
//! Kubernetes API (a kube-rs `Client`: in process, or any cluster through a
//! kubeconfig):
//!
//! - [`save`]: every object of every served resource as multi-document
//!   YAML ([`document`] reads and writes the files, kwokctl's `--format k8s`
//!   files included), written while the cluster is read ([`save::write`];
//!   a ksim cluster sends its objects as snapshot documents already);
//!   [`save::SaveOptions::export`] narrows it to what a simulation needs
//!   when copying a real cluster;
//! - [`restore`]: loads such a file into a cluster, keeping pods on their
//!   nodes with their status and remapping owner uids so that controllers
//!   adopt what they own;
//! - [`record`]: watch events with their times as a line-oriented,
//!   versioned file, and their replay.

pub mod api;
pub mod document;
pub mod record;
pub mod restore;
pub mod save;

pub use api::{RateLimit, Target};
pub use document::{
    Body, Document, Head, ScannedDocument, Style, parse_documents, scan_documents, write_documents,
};

/// What can go wrong with a snapshot or a recording.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A document of a snapshot file is not valid.
    #[error("document {document} (line {line}): {message}")]
    Document {
        /// 1-based number of the document in the file.
        document: usize,
        /// 1-based line in the file.
        line: usize,
        message: String,
    },
    /// A line of a recording is not valid.
    #[error("line {line}: {message}")]
    RecordLine { line: usize, message: String },
    /// The API answered with an error Status.
    #[error("{0}")]
    Api(String),
    /// The cluster could not be reached or answered something unreadable.
    #[error("{0}")]
    Transport(String),
    /// A kind in the file is not served by the cluster (`--strict`).
    #[error("{0}")]
    NotServed(String),
    /// The cluster already holds objects and neither merge nor replace was asked.
    #[error("{0}")]
    NotEmpty(String),
    /// A restore failed part way; what was applied is said.
    #[error("{0}")]
    Restore(String),
    /// Anything else wrong with the input.
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    /// The error of a failed request: the API's Status message word for
    /// word, else what the transport said.
    pub fn from_kube(error: kube::Error) -> Self {
        match error {
            kube::Error::Api(status) => Error::Api(if status.message.is_empty() {
                format!("{} ({})", status.reason, status.code)
            } else {
                status.message.clone()
            }),
            other => Error::Transport(format!("cannot reach the API server: {other}")),
        }
    }

    /// The HTTP code of an API error Status, if this is one.
    pub fn is_already_exists(error: &kube::Error) -> bool {
        matches!(error, kube::Error::Api(status) if status.code == 409 && status.reason == "AlreadyExists")
    }
}
