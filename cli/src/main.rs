//! `spindle`: the client CLI (see `spindle help`). Thin: the commands live in
//! `spindle::cli`.

#![forbid(unsafe_code)]

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    spindle::cli::init_tracing(&args);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(spindle::cli::EXIT_ERROR);
        }
    };
    ExitCode::from(runtime.block_on(spindle::cli::run(args)))
}
