package dev.tflkit.harness

import android.os.Process
import dev.tflkit.protocol.ResultWriter

/**
 * The runtime's own log for one backend: this process's logcat lines since the backend started
 * (an app may read its own logs). LiteRT and the GPU delegate log there, not on stderr.
 */
class DelegateLog private constructor(private val since: String) {
    fun text(): String = try {
        val proc = ProcessBuilder(
            "logcat", "-d", "-v", "epoch", "--pid=${Process.myPid()}", "-T", since,
        ).redirectErrorStream(true).start()
        val text = proc.inputStream.bufferedReader().readText()
        proc.waitFor()
        text.takeLast(20000)
    } catch (e: Exception) {
        "logcat unavailable: ${oneLine(e)}"
    }

    companion object {
        private val CLASSIC = Regex("""Replacing (\d+) out of (\d+) node\(s\) with delegate""")
        private val SUMMARY = Regex("""(\d+) operations will run on the GPU, and the remaining (\d+) operations""")

        fun start(): DelegateLog {
            val now = System.currentTimeMillis()
            return DelegateLog("%d.%03d".format(now / 1000, now % 1000))
        }

        /** Ops on the GPU out of all, from the classic delegate's or the accelerator's summary. */
        fun countsInto(record: ResultWriter.Backend) {
            val log = record.delegateLog
            CLASSIC.findAll(log).lastOrNull()?.let {
                record.opsDelegated = it.groupValues[1].toInt()
                record.opsTotal = it.groupValues[2].toInt()
                record.fullyAccelerated = record.opsDelegated == record.opsTotal
            }
            SUMMARY.findAll(log).lastOrNull()?.let {
                record.opsDelegated = it.groupValues[1].toInt()
                record.opsTotal = it.groupValues[1].toInt() + it.groupValues[2].toInt()
                record.fullyAccelerated = false
            }
        }
    }
}
