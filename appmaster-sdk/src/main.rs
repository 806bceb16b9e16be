//! `spindle`: the client CLI (see `spindle help`). Thin: the commands live in
//! `spindle_appmaster_sdk::cli`.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    spindle_appmaster_sdk::cli::init_tracing(&args);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(spindle_appmaster_sdk::cli::EXIT_ERROR);
        }
    };
    ExitCode::from(runtime.block_on(spindle_appmaster_sdk::cli::run(args)))
}
