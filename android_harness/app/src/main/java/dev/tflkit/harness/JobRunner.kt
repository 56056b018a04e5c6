package dev.tflkit.harness

import android.content.Context
import android.os.SystemClock
import dev.tflkit.protocol.Job
import dev.tflkit.protocol.Json
import dev.tflkit.protocol.ResultWriter
import java.io.File

/**
 * Runs every backend of a job, one after the other, in this process.
 *
 * Before a backend starts, `<result>.state/<backend>.json` records its stage; when it ends, the
 * file holds its finished record. A process that died (a GPU driver abort) leaves a stage
 * behind: on `resume` that backend is recorded as crashed and the others go on. result.json is
 * written last; the state folder is removed after it.
 */
class JobRunner(
    private val context: Context,
    private val jobDir: File,
    private val resultDir: File,
    private val resume: Boolean,
) {
    fun run() {
        val start = SystemClock.elapsedRealtimeNanos()
        val job = Job.read(jobDir.toPath())
        val stateDir = File(resultDir.parentFile, resultDir.name + ".state")
        stateDir.mkdirs()
        val harness: Map<String, Any?> = mapOf(
            "kind" to "android",
            "version" to HARNESS_VERSION,
            "runtime" to "LiteRT ${BuildConfigInfo.litertVersion}",
        )
        val device = DeviceInfo.collect(context)
        val writer = if (resume) {
            ResultWriter.resume(resultDir.toPath(), job.id, job.modelSha256, harness, device)
        } else {
            ResultWriter.create(resultDir.toPath(), job.id, job.modelSha256, harness, device)
        }
        for (name in job.backends) {
            val state = File(stateDir, "$name.json")
            if (state.exists()) {
                val saved = Json.map(Json.parse(state.readText()), state.name)
                if (saved["status"] != null) {
                    writer.restore(saved)
                } else {
                    val backend = writer.backend(name)
                    backend.status = "crashed"
                    backend.error = "the app's process died during ${saved["stage"]} " +
                        "(the GPU driver or runtime aborted it)"
                    backend.delegateLog = (saved["log"] as? String) ?: ""
                    state.writeText(Json.write(backend.toJson()))
                }
                continue
            }
            val backend = writer.backend(name)
            Backends.run(job, backend) { stage ->
                state.writeText(Json.write(mapOf("stage" to stage)))
            }
            state.writeText(Json.write(backend.toJson()))
        }
        writer.finish((SystemClock.elapsedRealtimeNanos() - start) / 1e9)
        stateDir.deleteRecursively()
    }

    companion object {
        const val HARNESS_VERSION = "1"
    }
}

/** The LiteRT version the app was built against (kept by hand next to app/build.gradle.kts). */
object BuildConfigInfo {
    const val litertVersion = "2.3.0"
}
