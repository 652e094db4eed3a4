! late_sender.f90: late_sender.c in Fortran (a receive posted before its message is sent,
! Scalasca's Late Sender), for checking that Fortran MPI calls are recorded and named.
!
! 2 ranks.  In each of ITERATIONS rounds rank 0 sleeps DELAY_MS and then sends one integer to
! rank 1 with MPI_SEND; rank 1 calls MPI_RECV at once and waits in it for about DELAY_MS.  An
! MPI_BARRIER before the loop starts the ranks together, one after every round keeps the rounds
! independent.
!
! The sleep is libc's nanosleep, called through ISO_C_BINDING (Fortran has no sleep shorter
! than a second); it is timed around the call with SYSTEM_CLOCK on 64-bit integers (gfortran:
! CLOCK_MONOTONIC in ns).
!
! Expected: Late Sender, waiting rank 1 in MPI_Recv, caused by rank 0, ~ DELAY_MS per round.
! Truth, printed by rank 0 after the loop (the same line as late_sender.c):
!   truth: pattern=late-sender rank=1 cause=0 delay_ns=N count=K function=MPI_Recv
!
! usage: mpirun -np 2 late_sender_f [DELAY_MS] [ITERATIONS]     defaults: 100 3
! build: mpif90 -O2 -g late_sender.f90 -o late_sender_f
program late_sender
    use mpi
    use, intrinsic :: iso_c_binding, only: c_int, c_long, c_null_ptr, c_ptr
    implicit none

    type, bind(c) :: timespec
        integer(c_long) :: tv_sec, tv_nsec
    end type timespec

    interface
        function nanosleep(req, rem) bind(c, name="nanosleep") result(rc)
            import :: c_int, c_ptr, timespec
            type(timespec), intent(in) :: req
            type(c_ptr), value :: rem
            integer(c_int) :: rc
        end function nanosleep
    end interface

    integer, parameter :: tag = 7
    integer :: ierr, rank, nranks, i, msg
    integer :: status(MPI_STATUS_SIZE)
    integer(8) :: delay_ms, iterations, slept_ns
    character(len=32) :: word
    ! When this rank left the barrier starting each round and the last one, and its time in
    ! the rounds' barriers (ns): the `exits:` line of the C examples (README.md).
    integer(8), allocatable :: exits(:)
    integer(8) :: in_barriers, entered

    call MPI_Init(ierr)
    call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
    call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
    delay_ms = 100
    iterations = 3
    if (command_argument_count() >= 1) then
        call get_command_argument(1, word)
        read (word, *) delay_ms
    end if
    if (command_argument_count() >= 2) then
        call get_command_argument(2, word)
        read (word, *) iterations
    end if
    if (nranks /= 2 .or. delay_ms < 0 .or. iterations < 1) then
        if (rank == 0) write (0, '(a)') 'usage: mpirun -np 2 late_sender_f [delay_ms] [iterations]'
        call MPI_Finalize(ierr)
        stop 2
    end if

    slept_ns = 0
    in_barriers = 0
    allocate (exits(iterations + 1))
    call MPI_Barrier(MPI_COMM_WORLD, ierr)
    do i = 1, int(iterations)
        exits(i) = clock_ns()
        msg = i
        if (rank == 0) then
            slept_ns = slept_ns + planted_sleep(delay_ms)
            call MPI_Send(msg, 1, MPI_INTEGER, 1, tag, MPI_COMM_WORLD, ierr)
        else
            call MPI_Recv(msg, 1, MPI_INTEGER, 0, tag, MPI_COMM_WORLD, status, ierr) ! the wait
        end if
        entered = clock_ns()
        call MPI_Barrier(MPI_COMM_WORLD, ierr)
        in_barriers = in_barriers + clock_ns() - entered
    end do
    exits(iterations + 1) = clock_ns()

    if (rank == 0 .and. delay_ms > 0) then
        write (*, '(a,i0,a,i0,a)') 'truth: pattern=late-sender rank=1 cause=0 delay_ns=', &
            slept_ns, ' count=', iterations, ' function=MPI_Recv'
        flush (6)
    end if
    call print_exits()
    call MPI_Finalize(ierr)

contains

    ! SYSTEM_CLOCK in ns (gfortran: CLOCK_MONOTONIC, like the C examples' clock).
    integer(8) function clock_ns()
        integer(8) :: count, rate
        call system_clock(count, rate)
        clock_ns = count * (1000000000_8 / rate)
    end function clock_ns

    ! `exits: rank=R ns=E1,...,En barrier_ns=T`, one record (one write: ranks' lines do not
    ! interleave).
    subroutine print_exits()
        character(len=:), allocatable :: line
        character(len=24) :: num
        integer :: at, k
        allocate (character(len=64 + 21 * size(exits)) :: line)
        write (line, '(a,i0,a)') 'exits: rank=', rank, ' ns='
        at = len_trim(line)
        do k = 1, size(exits)
            write (num, '(i0)') exits(k)
            if (k > 1) then
                line(at + 1:at + 1) = ','
                at = at + 1
            end if
            line(at + 1:at + len_trim(num)) = trim(num)
            at = at + len_trim(num)
        end do
        write (num, '(i0)') in_barriers
        write (*, '(a)') line(1:at)//' barrier_ns='//trim(num)
        flush (6)
    end subroutine print_exits

    ! Sleeps `ms` milliseconds (resumed after a signal) and returns the ns actually slept.
    integer(8) function planted_sleep(ms)
        integer(8), intent(in) :: ms
        integer(8) :: t0, t1, rate
        type(timespec) :: req
        req%tv_sec = int(ms / 1000, c_long)
        req%tv_nsec = int(mod(ms, 1000_8) * 1000000_8, c_long)
        call system_clock(t0, rate)
        if (nanosleep(req, c_null_ptr) /= 0) then
            ! Interrupted: sleep out the rest, measured on the same clock.
            do
                call system_clock(t1)
                if ((t1 - t0) * 1000_8 >= ms * rate) exit
            end do
        end if
        call system_clock(t1)
        planted_sleep = (t1 - t0) * (1000000000_8 / rate)
    end function planted_sleep

end program late_sender
