//! What reads the user's files: the scenario named on the command line (or in an experiment)
//! and every file it names, into a [`ScenarioSpec`] that carries their bytes. The CLI and the
//! lab call this on the machine where the user's files are; an agent never does — it builds
//! its plan from the spec alone (see [`crate::spec`]).

use std::path::Path;
use std::sync::Mutex;

use headroom_core::spec::{ScenarioSpec, SpecFile};
use headroom_scenario::Scenario;

use crate::usage::{errors_to_usage, UsageError};

/// True when the positional argument names a scenario file rather than a URL.
pub fn is_scenario(arg: &str) -> bool {
    let lower = arg.to_ascii_lowercase();
    !lower.starts_with("http://")
        && !lower.starts_with("https://")
        && [".yaml", ".yml", ".xml", ".har", ".json"]
            .iter()
            .any(|ext| lower.ends_with(ext))
}

/// A native scenario, or a Tsung XML or a HAR converted (their warnings go to stderr, one per
/// line). A HAR is a `.har` file, or a `.json` one holding `log.entries` (other `.json` files are
/// scenarios written in JSON, which YAML reads).
pub fn read_scenario(path: &Path) -> Result<Scenario, UsageError> {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let name = path.display().to_string();
    let imported = match ext.as_str() {
        "xml" => {
            let text = headroom_scenario::read_bounded_string(
                path,
                headroom_scenario::MAX_SCENARIO_BYTES,
                "scenario file",
            )
            .map_err(UsageError)?;
            headroom_scenario::import_tsung(&text, &name).map_err(errors_to_usage)?
        }
        "har" | "json" => {
            let text = headroom_scenario::har::read_har_file(path)
                .map_err(|e| UsageError(format!("{name}: {e}")))?;
            if ext == "json" && !headroom_scenario::har::looks_like_har(&text) {
                return headroom_scenario::parse_str(&text, &name).map_err(errors_to_usage);
            }
            let opts = headroom_scenario::HarOptions::default();
            headroom_scenario::import_har(&text, &name, &opts).map_err(errors_to_usage)?
        }
        _ => return headroom_scenario::load(path).map_err(errors_to_usage),
    };
    for w in &imported.warnings {
        eprintln!("headroom: warning: {w}");
    }
    Ok(imported.scenario)
}

/// The scenario file at `path` as a spec: read (converted if it is Tsung XML or a HAR), written
/// back in the native format, with every file it names read (relative to its directory).
pub fn scenario_file(path: &Path, target: Option<String>) -> Result<ScenarioSpec, UsageError> {
    let name = path.display().to_string();
    if !path.exists() {
        return Err(UsageError(format!(
            "scenario file '{name}' not found (a URL must start with http://)"
        )));
    }
    let scenario = read_scenario(path)?;
    let base = path.parent().unwrap_or(Path::new("."));
    scenario_spec(&name, &scenario, base, target)
}

/// `scenario` as a spec named `name`, with the files it names read below `base`. Compiling it
/// here finds them (and fails on one that cannot be read, naming it).
pub fn scenario_spec(
    name: &str,
    scenario: &Scenario,
    base: &Path,
    target: Option<String>,
) -> Result<ScenarioSpec, UsageError> {
    let read = headroom_scenario::files_below(base);
    let files = Mutex::new(Vec::<SpecFile>::new());
    let record = |f: &str| -> Result<Vec<u8>, String> {
        let data = read(f)?;
        let mut files = files.lock().unwrap_or_else(|e| e.into_inner());
        if !files.iter().any(|x| x.name == f) {
            files.push(SpecFile {
                name: f.to_string(),
                data: data.clone(),
            });
        }
        Ok(data)
    };
    headroom_scenario::compile_with(scenario, &record)
        .map_err(|e| UsageError(format!("{name}: {e}")))?;
    let yaml = headroom_scenario::to_yaml(scenario);
    check_text(name, &yaml)?;
    Ok(ScenarioSpec {
        name: name.to_string(),
        yaml,
        files: files.into_inner().unwrap_or_else(|e| e.into_inner()),
        target,
    })
}

/// A scenario's whole text (includes inlined, or converted from a Tsung XML or a HAR) within
/// [`headroom_scenario::MAX_SCENARIO_TEXT`]: what a byte of it costs to parse is why (see
/// docs/scenario.md, "Files it reads").
pub fn check_text(name: &str, yaml: &str) -> Result<(), UsageError> {
    let limit = headroom_scenario::MAX_SCENARIO_TEXT;
    if yaml.len() as u64 > limit {
        return Err(UsageError(format!(
            "{name}: the scenario is {} bytes of YAML (includes inlined, or as converted), over \
             the {} MiB a scenario may be: split it into smaller runs (a HAR: record fewer \
             requests)",
            yaml.len(),
            limit >> 20
        )));
    }
    Ok(())
}
