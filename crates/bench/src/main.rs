fn main() {
    std::process::exit(cairn_bench::cli::main());
}
