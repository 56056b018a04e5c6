plugins {
    id("com.android.application")
    id("org.jetbrains.kotlin.android")
}

android {
    namespace = "dev.tflkit.harness"
    compileSdk = 35

    defaultConfig {
        applicationId = "dev.tflkit.harness"
        // 26: java.nio.file (the protocol module) and logcat --pid (the delegate's log).
        minSdk = 26
        targetSdk = 35
        versionCode = 1
        versionName = "1"
    }

    buildTypes {
        debug { isMinifyEnabled = false }
        release {
            isMinifyEnabled = false
            signingConfig = signingConfigs.getByName("debug")
        }
    }

    compileOptions {
        sourceCompatibility = JavaVersion.VERSION_11
        targetCompatibility = JavaVersion.VERSION_11
    }
    kotlinOptions { jvmTarget = "11" }

    packaging { jniLibs { useLegacyPackaging = true } }
}

dependencies {
    implementation(project(":protocol"))
    // CompiledModel (GPU accelerator) and the classic Interpreter.
    implementation("com.google.ai.edge.litert:litert:2.3.0")
    // The classic GpuDelegate (org.tensorflow.lite.gpu).
    implementation("com.google.ai.edge.litert:litert-gpu:2.3.0")
    implementation("com.google.ai.edge.litert:litert-gpu-api:2.3.0")
}
