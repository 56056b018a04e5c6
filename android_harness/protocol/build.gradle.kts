// The job protocol (job.json, .npy I/O, result.json) in plain Java: no Android dependency, so
// it is compiled and tested on any JDK (tflkit's tests do it with javac; see ../README.md).
plugins {
    `java-library`
}

java {
    sourceCompatibility = JavaVersion.VERSION_11
    targetCompatibility = JavaVersion.VERSION_11
}

// The tests are a plain main() over the shared fixtures (no test framework to download).
tasks.register<JavaExec>("fixtureTest") {
    group = "verification"
    description = "Runs ProtocolTests against ./fixtures, writing to build/fixture-test."
    classpath = sourceSets["test"].runtimeClasspath
    mainClass.set("dev.tflkit.protocol.ProtocolTests")
    val out = layout.buildDirectory.dir("fixture-test").get().asFile
    doFirst { out.deleteRecursively() }
    args(file("fixtures").path, out.path)
}

tasks.named("check") { dependsOn("fixtureTest") }
