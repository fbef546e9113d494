//! The `ksim` binary: wires a cluster together and owns process life.

use anyhow::Context;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "ksim",
    version,
    about = "A Kubernetes cluster simulator in one binary"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a cluster in the foreground.
    Serve {
        /// Port to listen on (127.0.0.1); 0 picks a free one.
        #[arg(long, default_value_t = 0)]
        port: u16,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Serve { port } => {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
                .await
                .with_context(|| format!("cannot listen on 127.0.0.1:{port}"))?;
            let address = listener.local_addr()?;
            tracing::info!(%address, "serving");
            ksim_apiserver::serve(listener, ksim_apiserver::ApiServer::new()).await?;
        }
    }
    Ok(())
}
