//! `mill-pii`: replaces e-mail addresses, public IP addresses, phone numbers (and, when
//! asked, card numbers and IBANs) in document shards.

use clap::Parser;
use pipeline::cli::{StageArgs, run_stage};

#[derive(Debug, Parser)]
#[command(
    name = "mill-pii",
    version,
    about = "Replace personal data (e-mails, public IPs, phones, cards, IBANs) in documents"
)]
struct Args {
    #[command(flatten)]
    stage: StageArgs,
}

fn main() -> pipeline::Result<()> {
    let args = Args::parse();
    run_stage(&args.stage, |_, config| pii::step(config))?;
    Ok(())
}
