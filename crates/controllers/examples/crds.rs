//! Prints the CRDs the controllers serve, as YAML (`cargo run --example crds`).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut all = infrasim_controllers::crds::provider();
    all.extend(infrasim_controllers::crds::core());
    print!("{}", infrasim_controllers::crds::to_yaml(&all)?);
    Ok(())
}
