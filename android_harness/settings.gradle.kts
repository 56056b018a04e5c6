// tflkit's Android harness: the app (:app) and the plain-JVM protocol module (:protocol).
// LiteRT's Android libraries come from Google's Maven repository (google() below).
pluginManagement {
    repositories {
        google()
        mavenCentral()
        gradlePluginPortal()
    }
}

dependencyResolutionManagement {
    repositoriesMode.set(RepositoriesMode.FAIL_ON_PROJECT_REPOS)
    repositories {
        google()
        mavenCentral()
    }
}

rootProject.name = "tflkit-harness"
include(":protocol", ":app")
