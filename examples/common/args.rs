//! The command line the Fashion-MNIST examples share: `--data DIR --epochs N --batch N
//! --seed N`, each with the example's default.

pub struct Args {
    pub data: String,
    pub epochs: usize,
    pub batch: usize,
    pub seed: u64,
}

impl Args {
    /// The arguments over `defaults`; on a mistake, says it as `example: ...` and exits
    /// with status 2.
    pub fn parse(example: &str, defaults: Args) -> Args {
        match Args::read(defaults) {
            Ok(a) => a,
            Err(e) => {
                eprintln!("{example}: {e}");
                std::process::exit(2);
            }
        }
    }

    fn read(mut a: Args) -> Result<Args, String> {
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--data" => a.data = value()?,
                "--epochs" => a.epochs = value()?.parse().map_err(|e| format!("--epochs: {e}"))?,
                "--batch" => a.batch = value()?.parse().map_err(|e| format!("--batch: {e}"))?,
                "--seed" => a.seed = value()?.parse().map_err(|e| format!("--seed: {e}"))?,
                other => {
                    return Err(format!(
                        "unknown flag {other} (use --data DIR, --epochs N, --batch N, --seed N)"
                    ))
                }
            }
        }
        Ok(a)
    }
}
