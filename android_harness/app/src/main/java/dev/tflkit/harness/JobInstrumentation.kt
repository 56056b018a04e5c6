package dev.tflkit.harness

import android.app.Activity
import android.app.Instrumentation
import android.os.Bundle
import java.io.File

/**
 * Entry point: `am instrument -w -e job DIR -e result DIR [-e resume true]
 * dev.tflkit.harness/.JobInstrumentation`. Runs the job folder DIR and writes the result folder
 * (protocol: ../../../../../../../PROTOCOL.md). The outcome is reported in the instrumentation
 * result: `tflkit-status=ok` or `tflkit-error=<one line>`. A GPU driver that kills the process
 * shows up as "Process crashed"; the host then runs the command again with `-e resume true` and
 * the backend that was running is recorded as crashed.
 */
class JobInstrumentation : Instrumentation() {
    private var arguments: Bundle = Bundle()

    override fun onCreate(arguments: Bundle?) {
        super.onCreate(arguments)
        this.arguments = arguments ?: Bundle()
        start()
    }

    override fun onStart() {
        super.onStart()
        val results = Bundle()
        try {
            val job = File(arguments.getString("job") ?: throw IllegalArgumentException("-e job DIR is missing"))
            val result = File(arguments.getString("result") ?: throw IllegalArgumentException("-e result DIR is missing"))
            val resume = arguments.getString("resume") == "true"
            val runner = JobRunner(targetContext, job, result, resume)
            runner.run()
            results.putString("tflkit-status", "ok")
            results.putString("tflkit-result", result.path)
            finish(Activity.RESULT_OK, results)
        } catch (e: Throwable) {
            results.putString("tflkit-error", oneLine(e))
            finish(Activity.RESULT_CANCELED, results)
        }
    }
}

/** An exception as one line: its class when it has no message. */
fun oneLine(e: Throwable): String {
    val text = e.message?.lines()?.map { it.trim() }?.filter { it.isNotEmpty() }?.joinToString(" ")
    return if (text.isNullOrEmpty()) e.javaClass.simpleName else text
}
