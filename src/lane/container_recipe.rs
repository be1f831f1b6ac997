//! A container arm's recipe (`[arms.container]`): its table, its `docker run` command line and
//! stop commands, its launch spec. The lane code that runs it is [`super::container`].

use super::recipe::{
    resolve_env, At, CommandLine, EnvValue, LaunchCommand, Named, Proof, Recipe, RecipeKind,
    StopMethod,
};
use super::{ContainerSpec, LaunchSpec};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `[arms.container]`: `docker run --detach` with the image pinned by digest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContainerRecipe {
    /// The CLI (docker or a compatible one such as podman).
    #[serde(default = "default_docker")]
    pub docker: String,
    /// `repository@sha256:<64 hex>` (a tag may precede the digest).
    pub image: String,
    /// Arguments after the image: the engine's own flags.
    #[serde(default)]
    pub args: Vec<String>,
    /// `--env NAME=value`, or `--env NAME` for `from_env` values (the value then travels in the
    /// docker CLI's environment, never on its command line).
    #[serde(default)]
    pub env: BTreeMap<String, EnvValue>,
    /// GPU UUIDs for `--gpus`; default the lane's GPUs (filled by load). Must be lane GPUs.
    #[serde(default)]
    pub gpus: Vec<String>,
    /// The port the engine listens on inside the container; published on `lane.host:lane.port`.
    /// Default (0): the lane port (filled by load).
    #[serde(default)]
    pub container_port: u16,
    #[serde(default)]
    pub volumes: Vec<Volume>,
    /// Extra `--label`s; bakeoff always adds `bakeoff.campaign` and `bakeoff.arm` (ownership).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Extra `docker run` options placed before the image (e.g. `--ipc=host`, `--shm-size=16g`).
    #[serde(default)]
    pub run_args: Vec<String>,
    /// `--name`; default `bakeoff-<campaign id>-<arm id>` (filled by load).
    #[serde(default)]
    pub name: String,
}

fn default_docker() -> String {
    "docker".into()
}

/// `[[arms.container.volumes]]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Volume {
    /// Host path; absolute after load (relative to the campaign file's directory).
    pub host: PathBuf,
    /// Absolute path inside the container.
    pub container: String,
    #[serde(default)]
    pub read_only: bool,
}

impl Recipe for ContainerRecipe {
    fn kind(&self) -> RecipeKind {
        RecipeKind::Container
    }

    fn env(&self) -> Option<&BTreeMap<String, EnvValue>> {
        Some(&self.env)
    }

    /// `docker run --detach --name … --label bakeoff.campaign=… --label bakeoff.arm=… [--gpus
    /// "device=UUID,…"] --publish HOST:PORT:CPORT [--volume …] [--env NAME=value | --env NAME]
    /// [run_args] IMAGE [args]`; a `from_env` value is passed as `--env NAME` with the value in
    /// the docker CLI's environment; stop: `docker stop --time GRACE NAME`, then `docker rm
    /// --force NAME`.
    fn command(&self, at: &At) -> Option<LaunchCommand> {
        let c = self;
        let mut argv = vec![c.docker.clone(), "run".into(), "--detach".into()];
        argv.extend(["--name".into(), c.name.clone()]);
        for (k, v) in labels(c, at) {
            argv.extend(["--label".into(), format!("{k}={v}")]);
        }
        if !c.gpus.is_empty() {
            argv.extend(["--gpus".into(), format!("\"device={}\"", c.gpus.join(","))]);
        }
        let host = if at.host.contains(':') {
            format!("[{}]", at.host)
        } else {
            at.host.to_string()
        };
        argv.extend([
            "--publish".into(),
            format!("{host}:{}:{}", at.port, c.container_port),
        ]);
        for v in &c.volumes {
            argv.extend(["--volume".into(), volume_arg(v)]);
        }
        let mut cli_env = BTreeMap::new();
        for (k, v) in &c.env {
            match v {
                EnvValue::Literal(s) => argv.extend(["--env".into(), format!("{k}={s}")]),
                EnvValue::FromEnv(_) => {
                    argv.extend(["--env".into(), k.clone()]);
                    cli_env.insert(k.clone(), v.clone());
                }
            }
        }
        argv.extend(c.run_args.iter().cloned());
        argv.push(c.image.clone());
        argv.extend(c.args.iter().cloned());
        let mut start = CommandLine::new(argv);
        start.env = cli_env;
        let stop = vec![
            CommandLine::new(vec![
                c.docker.clone(),
                "stop".into(),
                "--time".into(),
                at.stop_grace_s.to_string(),
                c.name.clone(),
            ]),
            CommandLine::new(vec![
                c.docker.clone(),
                "rm".into(),
                "--force".into(),
                c.name.clone(),
            ]),
        ];
        Some(LaunchCommand {
            start,
            stop: StopMethod::Commands { commands: stop },
        })
    }

    /// The host side of its volumes (the image is pinned by digest in the recipe itself).
    fn named_files(&self) -> Named<'_> {
        Named::Paths(self.volumes.iter().map(|v| v.host.clone()).collect())
    }

    fn env_compared(&self) -> bool {
        false
    }

    fn launch_spec(
        &self,
        at: &At,
        lc: Option<&LaunchCommand>,
        log_path: &Path,
    ) -> Result<LaunchSpec, String> {
        lc.ok_or("the arm has no launch command")?;
        Ok(LaunchSpec::Container(ContainerSpec {
            image: self.image.clone(),
            args: self.args.clone(),
            env: resolve_env(&self.env)?,
            gpu_uuids: self.gpus.clone(),
            ports: vec![(at.port, self.container_port)],
            volumes: self.volumes.iter().map(volume_arg).collect(),
            labels: labels(self, at),
            run_args: self.run_args.clone(),
            name: self.name.clone(),
            log_path: log_path.to_path_buf(),
            docker: PathBuf::from(&self.docker),
        }))
    }

    fn detaches_itself(&self) -> bool {
        true
    }

    fn proof(&self) -> Proof {
        Proof::Process { planned_hash: true }
    }

    /// The listener on the lane port is docker's proxy (or, with host networking, the engine
    /// inside): the container itself is read back (`docker inspect`): its name, image digest
    /// and labels against the recipe's.
    fn running_identity(&self, at: &At) -> Option<Result<serde_json::Value, String>> {
        let labels = labels(self, at);
        Some(super::container_identity::prove(
            Path::new(&self.docker),
            &super::container_identity::Expected {
                name: &self.name,
                image: &self.image,
                labels: &labels,
            },
        ))
    }

    /// The image is present on the daemon (`docker image inspect`), else its registry lists it
    /// (`docker manifest inspect`: a digest-pinned image can be pulled again).
    fn restart_check(&self, _lc: Option<&LaunchCommand>) -> Result<String, String> {
        let ok = |args: &[&str]| {
            std::process::Command::new(&self.docker)
                .args(args)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        if ok(&["image", "inspect", &self.image]) {
            return Ok(format!(
                "its image {} is present on the Docker daemon",
                self.image
            ));
        }
        if ok(&["manifest", "inspect", &self.image]) {
            return Ok(format!(
                "its image {} is not present but its registry lists it (it can be pulled)",
                self.image
            ));
        }
        Err(format!(
            "its image {} is neither present on the Docker daemon nor listed by its registry; pull or push it first",
            self.image
        ))
    }
}

/// The ownership labels bakeoff adds (`bakeoff.campaign`, `bakeoff.arm`), then the recipe's.
fn labels(c: &ContainerRecipe, at: &At) -> Vec<(String, String)> {
    let mut labels = vec![
        ("bakeoff.campaign".to_string(), at.campaign_id.to_string()),
        ("bakeoff.arm".to_string(), at.arm_id.to_string()),
    ];
    labels.extend(c.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    labels
}

/// A volume as docker takes it: `/host:/container[:ro]`.
fn volume_arg(v: &Volume) -> String {
    let ro = if v.read_only { ":ro" } else { "" };
    format!("{}:{}{ro}", v.host.display(), v.container)
}
