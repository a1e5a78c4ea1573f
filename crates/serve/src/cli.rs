use clap::Parser;

/// Exit code for bad configuration (EX_USAGE from sysexits.h), so supervisors can tell it from a crash.
pub const EXIT_CONFIG: i32 = 64;

/// Parses the command line and environment into `T`, the binary's config struct.
///
/// Arguments that declare no `env` of their own (the shared [`crate::ServeArgs`]) get `<PREFIX>_<ID>` here, so
/// `--workers` reads `FLIGHT_WORKERS` in flight-rs and `METADATA_WORKERS` in metadata-rs from one definition.
/// A bad value prints one line on stderr and exits with [`EXIT_CONFIG`] before anything binds; `--help` and
/// `--version` behave as usual.
pub fn parse_or_exit<T: Parser>(env_prefix: &str) -> T {
    let command = command_with_env::<T>(env_prefix);
    let matches = match command.try_get_matches() {
        Ok(m) => m,
        Err(e) => exit_on_clap_error(e),
    };
    match T::from_arg_matches(&matches) {
        Ok(config) => config,
        Err(e) => exit_on_clap_error(e),
    }
}

/// The binary's clap command exactly as [`parse_or_exit`] parses it: every argument with the environment
/// variable it reads. Deployment files (docker-compose.yml, deploy/k8s) are tested against this, so an env var
/// or port they set that the server does not read fails a test instead of being silently ignored.
pub fn command_with_env<T: clap::CommandFactory>(env_prefix: &str) -> clap::Command {
    T::command().mut_args(|arg| {
        if arg.get_env().is_some() || arg.is_positional() {
            return arg;
        }
        let id = arg.get_id().as_str();
        if id == "help" || id == "version" {
            return arg;
        }
        let name = format!("{env_prefix}_{}", id.to_ascii_uppercase().replace('-', "_"));
        // clap wants a 'static name; this runs once per argument at startup.
        arg.env(&*Box::leak(name.into_boxed_str()))
    })
}

fn exit_on_clap_error(e: clap::Error) -> ! {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        e.exit();
    }
    // clap's first paragraph, on one line: "the following required arguments were not provided:" alone
    // would not say which.
    let rendered = e.to_string();
    let paragraph: Vec<&str> = rendered
        .lines()
        .skip_while(|l| l.trim().is_empty())
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    let message = if paragraph.is_empty() { "invalid configuration".to_string() } else { paragraph.join(" ") };
    exit_config(message.trim_start_matches("error: "))
}

/// Prints `config error: <message>` on stderr and exits with [`EXIT_CONFIG`].
pub fn exit_config(message: &str) -> ! {
    eprintln!("config error: {message}");
    std::process::exit(EXIT_CONFIG)
}
