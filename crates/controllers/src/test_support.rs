//! What unit tests of the controllers that drive a vCenter share: a simulator on loopback and
//! the credentials a controller would read for it.

use infrasim_vim_client::{Credentials, Trust};
use infrasim_vsphere_sim::{Instance, SimConfig};

/// A simulator of the default model whose password is `p`, and its credentials.
pub async fn simulator() -> (Instance, Credentials) {
    let config = SimConfig {
        password: "p".into(),
        ..Default::default()
    };
    let clock = infrasim_clock::SystemClock::shared();
    let sim = Instance::start(config, ([127, 0, 0, 1], 0).into(), clock)
        .await
        .expect("the simulator serves");
    let credentials = Credentials {
        server: sim.addr().to_string(),
        username: sim.simulator().config().username.clone(),
        password: "p".into(),
        trust: Trust::Thumbprint(sim.cert().thumbprint_sha256.clone()),
    };
    (sim, credentials)
}
